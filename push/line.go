package push

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/seckill/seckill/domain"
)

// A PENDING order's place in line (docs/design.md §3.11, §6.3). Each socket
// remembers the PENDING orders its buyer was told about: by the snapshot, a
// live event, or the api instance that admitted them (Waiting). Every
// LineRefresh the hub asks Options.Line, once for every order waiting on
// every socket here, where they stand, and tells each buyer the places that
// changed. An order that has left the line (its workflow started) gets one
// last PENDING event without a place, if it was told one, and is forgotten,
// as is an order any other status reached.

const defaultLineRefresh = 3 * time.Second

// Places answers where waiting orders stand in their sales' lines, by
// order id; only OrderID and SaleID of each ref are read. An order missing
// from the answer is no longer in line.
type Places func(ctx context.Context, orders []domain.OrderRef) (map[int64]domain.Place, error)

// waitingOrder is a PENDING order a socket's buyer was told about.
type waitingOrder struct {
	event domain.Event // as the buyer was told it, without a place
	ref   domain.OrderRef
	told  domain.Place // the place last sent; zero: none
	sent  time.Time    // when a place was last sent, or the order was noted
}

// Waiting notes that e's buyer has a new PENDING order, admitted by this
// instance: their sockets here get its place in line from the next refresh
// on. It sends nothing now (the buyer has the purchase's answer) and costs
// no Redis command, so the purchase path can afford it. A buyer whose
// sockets are on another instance learns the place from a snapshot
// (reconnecting) or GET /v1/orders/{id}.
func (h *Hub) Waiting(e domain.Event) {
	if h.opts.Line == nil || e.Status != domain.StatusPending {
		return
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if b := h.buyers[UserChannel(e.UserID)]; b != nil {
		for s := range b.sockets {
			s.mu.Lock()
			s.watch(e)
			s.mu.Unlock()
		}
	}
}

// refreshLine sends the buyers' waiting orders their places every
// LineRefresh until ctx ends.
func (h *Hub) refreshLine(ctx context.Context) {
	if h.opts.Line == nil {
		return
	}
	t := time.NewTicker(h.opts.LineRefresh)
	defer t.Stop()
	var all []*socket
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.RLock()
		all = h.sockets(all[:0])
		h.mu.RUnlock()
		asked := map[int64]bool{}
		var refs []domain.OrderRef
		for _, s := range all {
			s.mu.Lock()
			for _, w := range s.waiting {
				if !asked[w.ref.OrderID] {
					asked[w.ref.OrderID] = true
					refs = append(refs, w.ref)
				}
			}
			s.mu.Unlock()
		}
		if len(refs) > 0 {
			lctx, cancel := context.WithTimeout(ctx, h.opts.LineRefresh)
			places, err := h.opts.Line(lctx, refs)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil:
				// Once per outage: the refresh is retried every tick.
				if !failing {
					h.log.Warn("reading places in line failed; retrying every refresh", "err", err)
				}
				failing = true
			case err == nil:
				failing = false
				now := time.Now()
				for _, s := range all {
					s.refreshPlaces(asked, places, now)
				}
			}
		}
		clear(all)
	}
}

// watch remembers e, a PENDING order the buyer is told about (or admitted
// here), for refreshes. s.mu is held.
func (s *socket) watch(e domain.Event) {
	if s.closed || s.hub.opts.Line == nil {
		return
	}
	orderID, err1 := strconv.ParseInt(e.OrderID, 10, 64)
	saleID, err2 := strconv.ParseInt(e.SaleID, 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	told := domain.Place{Position: e.QueuePosition, ETASeconds: e.ETASeconds}
	e.QueuePosition, e.ETASeconds = 0, 0
	if s.waiting == nil {
		s.waiting = map[int64]*waitingOrder{}
	}
	if w := s.waiting[orderID]; w != nil {
		if told.Position > 0 {
			w.told = told
		}
		return
	}
	s.waiting[orderID] = &waitingOrder{event: e, ref: domain.OrderRef{OrderID: orderID, SaleID: saleID}, told: told, sent: time.Now()}
}

// settle forgets a waiting order that reached another status. While s is
// held, the snapshot (older than the live events) has not been queued yet:
// the order is remembered as settled so that its PENDING entry in the
// snapshot is not watched. s.mu is held.
func (s *socket) settle(orderID string) {
	id, err := strconv.ParseInt(orderID, 10, 64)
	if err != nil {
		return
	}
	delete(s.waiting, id)
	if s.held {
		if s.settledWhileHeld == nil {
			s.settledWhileHeld = map[int64]bool{}
		}
		s.settledWhileHeld[id] = true
	}
}

// refreshPlaces queues the changed places of s's waiting orders that were
// asked about. A refresh is only ever an update the next one supersedes,
// so it never makes a client slow: it is queued only when everything
// queued before has been written, and takes at most half the send buffer,
// leaving the rest to live events; the orders that did not fit, those told
// longest ago first, wait for the next refresh.
func (s *socket) refreshPlaces(asked map[int64]bool, places map[int64]domain.Place, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.held || len(s.waiting) == 0 || len(s.queue) > 0 {
		return
	}
	var due []*waitingOrder
	for id, w := range s.waiting {
		if !asked[id] {
			continue // noted after the places were asked for
		}
		p, inLine := places[id]
		switch {
		case !inLine && w.told.Position == 0:
			delete(s.waiting, id) // left the line, and was never told a place
		case p != w.told:
			due = append(due, w)
		}
	}
	slices.SortFunc(due, func(a, b *waitingOrder) int { return a.sent.Compare(b.sent) })
	room := max(s.hub.opts.SendBuffer/2, 1)
	for _, w := range due[:min(len(due), room)] {
		p, inLine := places[w.ref.OrderID]
		e := w.event
		e.QueuePosition, e.ETASeconds = p.Position, p.ETASeconds
		frame, err := json.Marshal(e)
		if err != nil {
			continue
		}
		s.queue = append(s.queue, outFrame{data: frame})
		if !inLine {
			delete(s.waiting, w.ref.OrderID) // told it has left: done with it
			continue
		}
		w.told, w.sent = p, now
	}
	s.kick()
}
