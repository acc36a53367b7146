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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/events"
)

const (
	defaultSendBuffer      = 16
	defaultWriteTimeout    = 10 * time.Second
	defaultPingInterval    = 25 * time.Second
	defaultMaxMessageBytes = 512

	// The pub/sub connection is pinged this often, so a healthy connection
	// is never silent for redisStaleAfter; one that is has died without a
	// FIN and is replaced.
	redisPingInterval = 5 * time.Second
	redisStaleAfter   = 3 * redisPingInterval

	// subscribeWait bounds how long a new socket waits for Redis to confirm
	// its buyer's subscription; past it the socket is closed with "try again
	// later" rather than left open and deaf.
	subscribeWait = 10 * time.Second
	// A confirmation PING whose PONG has not come back by then was lost
	// with a broken connection, and is sent again.
	confirmRetry = 2 * time.Second

	minRetry = 100 * time.Millisecond
	maxRetry = 5 * time.Second
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
	h.receive(ctx)
	wg.Wait()
	h.shutdown()
	return nil
}

func (h *Hub) receive(ctx context.Context) {
	delay := minRetry
	for {
		// A deadline carried by the context, unlike ReceiveTimeout's timeout,
		// makes go-redis treat a silent connection as broken and replace it.
		rctx, cancel := context.WithTimeout(ctx, redisStaleAfter)
		msg, err := h.ps.Receive(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, redis.ErrClosed) {
				return
			}
			h.log.Warn("redis pub/sub receive failed; retrying", "err", err, "retry_in", delay)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(delay*2, maxRetry)
			continue
		}
		delay = minRetry
		switch m := msg.(type) {
		case *redis.Message:
			h.dispatch(m)
		case *redis.Pong:
			h.pongReceived(m.Payload)
		}
	}
}

// keepAlive pings the pub/sub connection: a write to a dead connection fails
// and makes go-redis replace it, and the PONGs keep a healthy one from
// looking stale to receive.
func (h *Hub) keepAlive(ctx context.Context) {
	t := time.NewTicker(redisPingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := h.ps.Ping(ctx); errors.Is(err, redis.ErrClosed) {
				return
			}
		}
	}
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
	userID := strings.TrimPrefix(m.Channel, events.UserChannel(""))
	frame, err := encodeEvent(m.Payload)
	if err != nil {
		h.log.Warn("skipping malformed order event", "user_id", userID, "err", err)
		return
	}
	var slow []*socket
	h.mu.RLock()
	if b := h.buyers[m.Channel]; b != nil {
		for s := range b.sockets {
			if !s.enqueue(frame) {
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

// encodeEvent checks a published payload and returns the frame sent to the
// buyer: the domain.Event JSON, re-encoded so that a client never sees
// anything but that shape.
func encodeEvent(payload string) ([]byte, error) {
	var e domain.Event
	if err := json.Unmarshal([]byte(payload), &e); err != nil {
		return nil, err
	}
	if e.Type != "order" || e.OrderID == "" || !e.Status.Valid() {
		return nil, fmt.Errorf("not an order event: type %q, order %q, status %q", e.Type, e.OrderID, e.Status)
	}
	return json.Marshal(e)
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

// join registers s, so events for its buyer queue up from now on, and
// subscribes the buyer's channel if s is their first socket here.
func (h *Hub) join(ctx context.Context, s *socket) error {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return errStopped
	}
	if err := ctx.Err(); err != nil {
		h.mu.Unlock()
		return err // s was dropped already: nothing to register or subscribe
	}
	b := h.buyers[s.channel]
	if b == nil {
		b = &buyer{userID: s.userID, sockets: make(map[*socket]struct{})}
		h.buyers[s.channel] = b
	}
	b.sockets[s] = struct{}{}
	first := len(b.sockets) == 1
	h.mu.Unlock()
	if first {
		// go-redis remembers the channel even when the write fails and
		// subscribes it on the next connection; awaitSubscribed waits for that.
		if err := h.ps.Subscribe(ctx, s.channel); err != nil {
			s.log.Warn("redis subscribe failed; waiting for the reconnect", "err", err)
		}
	}
	return nil
}

// leave unregisters s and unsubscribes its buyer if s was their last socket.
func (h *Hub) leave(s *socket) {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	b := h.buyers[s.channel]
	if b == nil {
		h.mu.Unlock()
		return
	}
	delete(b.sockets, s)
	last := len(b.sockets) == 0
	if last {
		delete(h.buyers, s.channel)
	}
	h.mu.Unlock()
	if last {
		ctx, cancel := context.WithTimeout(context.Background(), h.opts.WriteTimeout)
		defer cancel()
		// On failure go-redis has already forgotten the channel and drops the
		// connection, so the subscription cannot outlive the buyer's sockets.
		if err := h.ps.Unsubscribe(ctx, s.channel); err != nil && !errors.Is(err, redis.ErrClosed) {
			s.log.Debug("redis unsubscribe failed", "err", err)
		}
	}
}

// awaitSubscribed returns once Redis has processed the SUBSCRIBE of every
// socket that joined before the call. go-redis's Subscribe only writes the
// command; Redis answers one connection's commands in order, so the PONG to
// a PING written after it proves it was applied. If the connection is
// replaced in between, go-redis subscribes every remembered channel on the
// new one before sending the PING there, so the proof still holds.
func (h *Hub) awaitSubscribed(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, subscribeWait)
	defer cancel()
	retry := minRetry
	for {
		token := "seckill-push-" + strconv.FormatUint(h.pongSeq.Add(1), 10)
		pong := make(chan struct{})
		h.pongMu.Lock()
		h.pongs[token] = pong
		h.pongMu.Unlock()

		wait := confirmRetry
		if err := h.ps.Ping(ctx, token); err != nil {
			if errors.Is(err, redis.ErrClosed) {
				h.forgetPong(token)
				return errStopped
			}
			wait, retry = retry, min(retry*2, maxRetry)
		}
		timer := time.NewTimer(wait)
		select {
		case <-pong:
			timer.Stop()
			return nil
		case <-ctx.Done():
			timer.Stop()
			h.forgetPong(token)
			return ctx.Err()
		case <-timer.C:
			h.forgetPong(token)
		}
	}
}

func (h *Hub) pongReceived(token string) {
	h.pongMu.Lock()
	defer h.pongMu.Unlock()
	if pong, ok := h.pongs[token]; ok {
		delete(h.pongs, token)
		close(pong)
	}
}

func (h *Hub) forgetPong(token string) {
	h.pongMu.Lock()
	defer h.pongMu.Unlock()
	delete(h.pongs, token)
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
