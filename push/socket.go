package push

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/domain"
)

// closeGrace is how long the server waits for the client's answer to its
// close frame before closing the connection: closing first could make the
// kernel reset the connection and discard frames the client has not read.
const closeGrace = time.Second

// Application close codes (RFC 6455 leaves 4000-4999 to applications),
// documented in README.md and docs/design.md §6.3.
const (
	// CloseTokenExpired ends a socket when the token it was opened with
	// expires; the client reconnects with a fresh token.
	CloseTokenExpired = 4001
	// CloseTooManySockets refuses a socket beyond Options.MaxSocketsPerUser
	// or Options.MaxSockets; the client may try again later, with backoff.
	CloseTooManySockets = 4008
)

var (
	closeGoingAway     = websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down")
	closeTryAgain      = websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "order events unavailable, reconnect")
	closeInternal      = websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "order snapshot unavailable, reconnect")
	closeTokenExpired  = websocket.FormatCloseMessage(CloseTokenExpired, "token expired")
	closeTooManyOfUser = websocket.FormatCloseMessage(CloseTooManySockets, "too many sockets for this user")
	closeTooManyHere   = websocket.FormatCloseMessage(CloseTooManySockets, "too many sockets on this server")
)

// socket is one websocket connection. Frames reach it through its queue,
// which a writer goroutine drains while it is not empty: dispatch and the
// hub's ping ticker only queue, never write.
type socket struct {
	hub     *Hub
	conn    *websocket.Conn
	userID  string
	channel string
	log     *slog.Logger
	// expires is when the buyer's token expires (zero: never); expiry is
	// the timer that closes s then.
	expires time.Time
	expiry  *time.Timer

	mu      sync.Mutex
	queue   []outFrame // waiting to be written, in order
	held    bool       // until the snapshot is queued ahead of the live events
	writing bool       // a writer goroutine is draining queue
	closed  bool       // dropped: nothing more is queued or written
	limit   int        // live frames queued at most before the client counts as slow
	// waiting are the PENDING orders whose place in line s is kept told
	// of, by order id (line.go); settledWhileHeld the orders that reached
	// another status while the snapshot was read.
	waiting          map[int64]*waitingOrder
	settledWhileHeld map[int64]bool

	done       chan struct{} // closed by drop
	readerDone chan struct{} // closed when the reader has returned
	opened     chan struct{} // closed when Serve has returned
	cancel     context.CancelFunc

	dropOnce   sync.Once
	closeFrame []byte // set by the first drop; nil closes without a close frame

	writeTimeout time.Duration
}

// outFrame is an event frame or a ping.
type outFrame struct {
	data []byte
	ping bool
}

// enqueue queues frame without waiting; false means the client is too slow
// (its queue is full).
func (s *socket) enqueue(frame []byte) bool { return s.push(outFrame{data: frame}) }

// deliver queues the frame of live event e, like enqueue, and keeps the
// orders whose place in line s refreshes in step with what the buyer was
// told: in the same critical section, so a refresh can never be queued
// behind the event that ended the order's wait.
func (s *socket) deliver(frame []byte, e domain.Event) bool {
	if s.hub.opts.Line == nil {
		return s.enqueue(frame)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pushLocked(outFrame{data: frame}) {
		return false
	}
	if e.Status == domain.StatusPending {
		s.watch(e)
	} else {
		s.settle(e.OrderID)
	}
	return true
}

// ping queues a ping; false means the client is too slow.
func (s *socket) ping() bool { return s.push(outFrame{ping: true}) }

func (s *socket) push(f outFrame) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pushLocked(f)
}

// pushLocked is push with s.mu held.
func (s *socket) pushLocked(f outFrame) bool {
	if s.closed {
		return true // already closing: nothing to deliver, nobody to drop
	}
	if !s.expires.IsZero() && !time.Now().Before(s.expires) {
		// The expiry timer closes s, maybe a moment late: until it does,
		// nothing reaches a buyer whose token has expired.
		return true
	}
	if len(s.queue) >= s.limit {
		return false
	}
	s.queue = append(s.queue, f)
	s.kick()
	return true
}

// start queues the snapshot ahead of whatever live events arrived while it
// was read, and lets the writing begin. pending are the snapshot's PENDING
// orders, whose place in line s is then kept told of, unless a live event
// queued meanwhile ended their wait.
func (s *socket) start(snapshot [][]byte, pending []domain.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	frames := make([]outFrame, 0, len(snapshot)+len(s.queue))
	for _, b := range snapshot {
		frames = append(frames, outFrame{data: b})
	}
	s.queue = append(frames, s.queue...)
	s.limit += len(snapshot)
	s.held = false
	for _, e := range pending {
		if id, err := strconv.ParseInt(e.OrderID, 10, 64); err == nil && !s.settledWhileHeld[id] {
			s.watch(e)
		}
	}
	s.settledWhileHeld = nil
	s.kick()
}

// kick starts a writer if there is something to write and none runs.
// s.mu is held.
func (s *socket) kick() {
	if !s.held && !s.writing && !s.closed && len(s.queue) > 0 {
		s.writing = true
		go s.flush()
	}
}

// flush writes queued frames in order until the queue is empty or s is
// dropped; a failed write drops s.
func (s *socket) flush() {
	for {
		s.mu.Lock()
		if s.closed || len(s.queue) == 0 {
			s.writing = false
			s.queue = nil // an idle socket holds no backing array
			s.limit = s.hub.opts.SendBuffer
			s.mu.Unlock()
			return
		}
		f := s.queue[0]
		s.queue[0] = outFrame{}
		s.queue = s.queue[1:]
		s.mu.Unlock()

		var err error
		if f.ping {
			err = s.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.writeTimeout))
		} else {
			err = s.write(f.data)
		}
		if err != nil {
			s.log.Debug("websocket write failed", "err", err)
			s.mu.Lock()
			s.writing, s.closed = false, true // no other writer may start on a broken connection
			s.mu.Unlock()
			s.drop(nil)
			return
		}
	}
}

// drop ends s. The first reason wins; closeFrame is sent when s closes.
func (s *socket) drop(closeFrame []byte) {
	s.dropOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.queue = nil
		s.mu.Unlock()
		s.closeFrame = closeFrame
		close(s.done)
		s.cancel()
		go s.end()
	})
}

// dropSlow drops s without a close frame, which would only queue behind the
// backlog that made s slow. Closing the connection also ends a write blocked
// on the client.
func (s *socket) dropSlow() {
	s.drop(nil)
	_ = s.conn.Close()
}

// end closes a dropped socket and lets the hub forget it, once Serve is
// done with it (drop cancels what Serve may still wait for).
func (s *socket) end() {
	<-s.opened
	if s.expiry != nil {
		s.expiry.Stop()
	}
	s.finish()
	s.hub.leave(s)
	s.hub.conns.Add(-1)
	s.hub.releaseSlot(s.userID)
	s.log.Debug("websocket closed")
	s.hub.serving.Done()
}

func (s *socket) readUntilClosed() {
	for {
		// Clients have nothing to say but pongs and close, which the
		// handlers take; anything else is skipped by the next NextReader.
		if _, _, err := s.conn.NextReader(); err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				s.log.Info("websocket client sent an oversized message; disconnecting")
			} else {
				s.log.Debug("websocket read ended", "err", err)
			}
			return
		}
	}
}

func (s *socket) write(frame []byte) error {
	if err := s.conn.SetWriteDeadline(time.Now().Add(s.writeTimeout)); err != nil {
		return err
	}
	return s.conn.WriteMessage(websocket.TextMessage, frame)
}

// finish closes the connection, after a close handshake if s was dropped
// with a close frame, and waits for the reader to end.
func (s *socket) finish() {
	if s.closeFrame != nil && s.conn.WriteControl(websocket.CloseMessage, s.closeFrame, time.Now().Add(s.writeTimeout)) == nil {
		timer := time.NewTimer(closeGrace)
		select {
		case <-s.readerDone:
		case <-timer.C:
		}
		timer.Stop()
	}
	_ = s.conn.Close()
	<-s.readerDone
}
