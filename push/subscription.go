package push

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The hub's side of Redis pub/sub: one connection for every buyer
// connected here, its receive loop and keepalive, and the SUBSCRIBE and
// UNSUBSCRIBE of a buyer's channel as their first socket joins and their
// last one leaves.

const (
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
