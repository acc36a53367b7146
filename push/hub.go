// Package push is the server side of the websocket result channel (docs/design.md §6.3):
// it tells each connected buyer what happens to their orders. Events reach it
// over Redis pub/sub from whichever worker produced them, so any api instance
// can hold any buyer's socket.
package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
)

const (
	defaultSendBuffer      = 16
	defaultWriteTimeout    = 10 * time.Second
	defaultPingInterval    = 25 * time.Second
	defaultMaxMessageBytes = 512
)

// Options tune a Hub. The zero value works.
type Options struct {
	// AllowedOrigins: exact origins ("http://localhost:8080") allowed to
	// open a socket, besides the request's own host, which is always
	// allowed. Empty = same-origin only (Origin host == request Host). A
	// request without an Origin header (not a browser) is allowed: the
	// check guards against other sites' pages riding a buyer's browser, and
	// browsers always send Origin on a websocket handshake.
	AllowedOrigins []string
	// SendBuffer is the number of events queued for one socket before the
	// client is considered slow and dropped; default 16 (a buyer gets a few
	// events per order).
	SendBuffer int
	// WriteTimeout is the write deadline of each message; default 10s.
	WriteTimeout time.Duration
	// PingInterval is how often the server pings; default 25s. A client
	// that has not answered for 2*PingInterval is disconnected.
	PingInterval time.Duration
	// MaxMessageBytes is the largest client->server message; default 512
	// (clients only send pongs and close).
	MaxMessageBytes int64
	Logger          *slog.Logger
	// Line, if set, answers the places in line of PENDING orders: every
	// LineRefresh (default 3s) the hub asks it, once for all the PENDING
	// orders its buyers were told about, and sends each buyer the places
	// that changed (line.go). Nil: no places are sent.
	Line        Places
	LineRefresh time.Duration
	// MaxSocketsPerUser and MaxSockets cap the sockets open on this
	// instance of one buyer and of all buyers; 0 = no cap. A socket beyond
	// either is refused: it is closed at once with CloseTooManySockets,
	// before it costs a subscription or a snapshot (Serve).
	MaxSocketsPerUser int
	MaxSockets        int
}

func (o Options) withDefaults() Options {
	if o.SendBuffer <= 0 {
		o.SendBuffer = defaultSendBuffer
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = defaultWriteTimeout
	}
	if o.PingInterval <= 0 {
		o.PingInterval = defaultPingInterval
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = defaultMaxMessageBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LineRefresh <= 0 {
		o.LineRefresh = defaultLineRefresh
	}
	return o
}

// Snapshot returns the current state of the user's recent orders. It is read
// after the user's live events are subscribed, so a result produced while
// the buyer was away is in the snapshot, in the live stream, or both.
type Snapshot func(ctx context.Context, userID string) ([]domain.Event, error)

// Hub holds the websocket connections of one api instance and feeds each the
// events of its buyer. All buyers share one Redis pub/sub connection, on
// which the hub subscribes exactly the buyers connected here.
type Hub struct {
	ps       *redis.PubSub
	snapshot Snapshot
	opts     Options
	log      *slog.Logger
	origins  map[string]bool // lower-case, no trailing slash

	running atomic.Bool
	conns   atomic.Int64

	// subMu serialises the first-socket and last-socket decisions with the
	// SUBSCRIBE and UNSUBSCRIBE they cause, so the commands reach Redis in
	// the order the decisions were made: an UNSUBSCRIBE overtaking a later
	// SUBSCRIBE would leave a connected buyer deaf.
	subMu sync.Mutex

	mu      sync.RWMutex
	buyers  map[string]*buyer // by pub/sub channel
	stopped bool
	serving sync.WaitGroup // Serve calls admitted before stopped was set

	pongMu  sync.Mutex
	pongs   map[string]chan struct{}
	pongSeq atomic.Uint64

	// writeBuffers lend sockets a write buffer only while they write: an
	// idle buyer's socket then holds none (see Serve).
	writeBuffers sync.Pool

	// slots are the sockets counted against the caps, by user and in all:
	// taken before the handshake, so that concurrent handshakes cannot
	// all squeeze under a cap, and given back when the socket ends.
	slotMu    sync.Mutex
	userSlots map[string]int
	slots     int
}

// buyer is the set of sockets one user has open on this instance.
type buyer struct {
	userID  string
	sockets map[*socket]struct{}
}

var errStopped = errors.New("push: hub stopped")

// NewHub returns a Hub reading events through rdb and sending each new
// socket snapshot's events first. Call Run to start it.
func NewHub(rdb redis.UniversalClient, snapshot Snapshot, opts Options) *Hub {
	opts = opts.withDefaults()
	origins := make(map[string]bool, len(opts.AllowedOrigins))
	for _, o := range opts.AllowedOrigins {
		origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	return &Hub{
		// Subscribing to nothing does not connect; Run's first receive does.
		ps:       rdb.Subscribe(context.Background()),
		snapshot: snapshot,
		opts:     opts,
		log:      opts.Logger,
		origins:  origins,
		buyers:   make(map[string]*buyer),
		pongs:    make(map[string]chan struct{}),

		userSlots: make(map[string]int),
	}
}

// Connections is the number of open sockets.
func (h *Hub) Connections() int { return int(h.conns.Load()) }

// Run receives events from Redis and hands them to the sockets until ctx
// ends; then it closes every socket (close code 1001, going away), waits for
// them, and returns nil. Serve calls after that answer 503. Sockets opened
// while Run is not running wait for it (it reads the subscription
// confirmations), and are closed with 1013 after subscribeWait.
//
// A lost Redis connection is not an error: go-redis redials on the next
// receive and, before any other command on the new connection, subscribes
// again every channel it remembers (PubSub.conn -> resubscribe). Events
// published while it was down are lost (delivery is at most once); a buyer
// gets their order's state in the snapshot on reconnecting.
func (h *Hub) Run(ctx context.Context) error {
	if !h.running.CompareAndSwap(false, true) {
		return errors.New("push: hub is already running")
	}
	// Closing the PubSub is what unblocks a Receive waiting for data.
	stop := context.AfterFunc(ctx, func() { _ = h.ps.Close() })
	defer stop()

	var wg sync.WaitGroup
	wg.Go(func() { h.keepAlive(ctx) })
	wg.Go(func() { h.pingSockets(ctx) })
	wg.Go(func() { h.refreshLine(ctx) })
	h.receive(ctx)
	wg.Wait()
	h.shutdown()
	return nil
}

// pingSockets queues a ping on every socket each PingInterval: one ticker
// for all of them, instead of a timer and a goroutine a socket. A socket
// whose queue is full is dropped as slow.
func (h *Hub) pingSockets(ctx context.Context) {
	t := time.NewTicker(h.opts.PingInterval)
	defer t.Stop()
	var all, slow []*socket
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		slow = slow[:0]
		h.mu.RLock()
		all = h.sockets(all[:0])
		h.mu.RUnlock()
		for _, s := range all {
			if !s.ping() {
				slow = append(slow, s)
			}
		}
		h.dropSlow(slow)
		clear(all)
	}
}

// dispatch queues one published event on every socket of its buyer, without
// ever waiting for a socket: one that has no room left is dropped.
func (h *Hub) dispatch(m *redis.Message) {
	userID := channelUser(m.Channel)
	e, frame, err := encodeEvent(m.Payload)
	if err != nil {
		h.log.Warn("skipping malformed order event", "user_id", userID, "err", err)
		return
	}
	var slow []*socket
	h.mu.RLock()
	if b := h.buyers[m.Channel]; b != nil {
		for s := range b.sockets {
			if !s.deliver(frame, e) {
				slow = append(slow, s)
			}
		}
	}
	h.mu.RUnlock()
	h.dropSlow(slow)
}

// dropSlow drops sockets whose queue was full.
func (h *Hub) dropSlow(slow []*socket) {
	for _, s := range slow {
		h.log.Warn("dropping slow websocket client", "user_id", s.userID, "send_buffer", h.opts.SendBuffer)
		s.dropSlow()
	}
}

// sockets appends every registered socket to dst. h.mu is held.
func (h *Hub) sockets(dst []*socket) []*socket {
	for _, b := range h.buyers {
		for s := range b.sockets {
			dst = append(dst, s)
		}
	}
	return dst
}

// encodeEvent checks a published payload and returns it with the frame sent
// to the buyer: the domain.Event JSON, re-encoded so that a client never
// sees anything but that shape.
func encodeEvent(payload string) (domain.Event, []byte, error) {
	var e domain.Event
	if err := json.Unmarshal([]byte(payload), &e); err != nil {
		return e, nil, err
	}
	if e.Type != "order" || e.OrderID == "" || !e.Status.Valid() {
		return e, nil, fmt.Errorf("not an order event: type %q, order %q, status %q", e.Type, e.OrderID, e.Status)
	}
	b, err := json.Marshal(e)
	return e, b, err
}

// takeSlot counts a socket of userID against the caps. It returns nil, or
// the close frame that refuses the socket when a cap is reached; only a nil
// answer took a slot, which releaseSlot gives back.
func (h *Hub) takeSlot(userID string) []byte {
	h.slotMu.Lock()
	defer h.slotMu.Unlock()
	if limit := h.opts.MaxSocketsPerUser; limit > 0 && h.userSlots[userID] >= limit {
		return closeTooManyOfUser
	}
	if limit := h.opts.MaxSockets; limit > 0 && h.slots >= limit {
		return closeTooManyHere
	}
	h.userSlots[userID]++
	h.slots++
	return nil
}

func (h *Hub) releaseSlot(userID string) {
	h.slotMu.Lock()
	defer h.slotMu.Unlock()
	h.slots--
	if n := h.userSlots[userID] - 1; n > 0 {
		h.userSlots[userID] = n
	} else {
		delete(h.userSlots, userID)
	}
}

// admit counts a Serve call in, unless the hub has stopped.
func (h *Hub) admit() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return false
	}
	h.serving.Add(1)
	return true
}

// shutdown closes every socket and waits for them to end.
func (h *Hub) shutdown() {
	h.mu.Lock()
	h.stopped = true
	all := h.sockets(nil)
	h.mu.Unlock()
	for _, s := range all {
		s.drop(closeGoingAway)
	}
	h.serving.Wait()
}
