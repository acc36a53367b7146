package push

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/domain"
)

// readBufferBytes is a socket's read buffer; frames larger than it are
// still read whole (up to Options.MaxMessageBytes).
const readBufferBytes = 512

// Serve upgrades the request to a websocket of userID, who the caller has
// authenticated, and returns once the user's order snapshot is read; the
// socket then sends it followed by their live events, until either side
// closes, in goroutines of its own (Stop waits for them). A non-empty
// subprotocol is selected in the handshake if the client offered it.
// expires, unless zero, is when the credentials userID proved expire: the
// socket is closed then with CloseTokenExpired, and sent nothing after.
//
// A socket beyond the caps (Options.MaxSocketsPerUser, MaxSockets) is
// upgraded only to be closed at once with CloseTooManySockets: a browser
// sees the close code and its reason, where a refused handshake would show
// it nothing but a failed connection. The sockets already open are kept.
//
// Returning at once lets the HTTP server free what it holds per request
// (its buffers, and a stack grown by the handshake): most sockets sit idle
// for minutes, and ten thousand of them would otherwise keep all of it.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, userID string, expires time.Time, subprotocol string) {
	log := h.log.With("user_id", userID)
	if !h.admit() {
		http.Error(w, "server shutting down", http.StatusServiceUnavailable)
		return
	}
	refusal := h.takeSlot(userID)

	// Most sockets sit idle for minutes waiting for one event, so they
	// hold as little as possible: a small read buffer (clients send
	// nothing but pongs and the close) and a pooled write buffer.
	up := websocket.Upgrader{CheckOrigin: h.originAllowed, ReadBufferSize: readBufferBytes, WriteBufferPool: &h.writeBuffers}
	if subprotocol != "" {
		up.Subprotocols = []string{subprotocol}
	}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		// Upgrade has answered (403 for a refused origin). The URL and the
		// subprotocol may carry the token, so neither is logged.
		log.Info("websocket handshake refused", "origin", r.Header.Get("Origin"), "err", err)
		if refusal == nil {
			h.releaseSlot(userID)
		}
		h.serving.Done()
		return
	}
	if refusal != nil {
		log.Info("websocket refused: too many sockets", "per_user_cap", h.opts.MaxSocketsPerUser, "cap", h.opts.MaxSockets)
		h.refuse(conn, refusal)
		h.serving.Done()
		return
	}
	h.conns.Add(1)

	// The request's context ends when Serve returns; the socket's does not.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	s := &socket{
		hub:          h,
		conn:         conn,
		userID:       userID,
		channel:      UserChannel(userID),
		log:          log,
		held:         true,
		limit:        h.opts.SendBuffer,
		done:         make(chan struct{}),
		readerDone:   make(chan struct{}),
		opened:       make(chan struct{}),
		cancel:       cancel,
		writeTimeout: h.opts.WriteTimeout,
		expires:      expires,
	}
	s.log.Debug("websocket opened")
	if !expires.IsZero() {
		// A token still inside Verify's leeway has expired already: the
		// timer fires at once, and the client learns why.
		s.expiry = time.AfterFunc(time.Until(expires), func() {
			s.log.Debug("websocket token expired")
			s.drop(closeTokenExpired)
		})
	}
	// Whatever ends s waits for this: s must not be forgotten by the hub
	// before open has registered it.
	defer close(s.opened)

	// Reading starts at once, so pongs and a client's close are handled
	// while the snapshot is read, and a client that leaves cancels it.
	conn.SetReadLimit(h.opts.MaxMessageBytes)
	pongWait := 2 * h.opts.PingInterval
	_ = conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(pongWait)) })
	go func() {
		defer close(s.readerDone)
		s.readUntilClosed()
		s.drop(nil)
	}()

	// The snapshot (a database query) is read on this goroutine, whose
	// stack is freed when Serve returns. From then on an idle socket has
	// one goroutine, its reader: frames are written by a goroutine that
	// exists only while there is something to write (see enqueue).
	if frames, pending, ok := h.open(ctx, s); ok {
		s.start(frames, pending)
	}
}

// open registers s and returns the snapshot frames to send before the live
// events, and the snapshot's PENDING orders. The subscription is live before
// the snapshot is read, so an event published meanwhile is queued on s
// rather than lost.
func (h *Hub) open(ctx context.Context, s *socket) ([][]byte, []domain.Event, bool) {
	if err := h.join(ctx, s); err != nil {
		s.drop(closeGoingAway)
		return nil, nil, false
	}
	if err := h.awaitSubscribed(ctx); err != nil {
		switch {
		case errors.Is(err, errStopped):
			s.drop(closeGoingAway)
		case ctx.Err() == nil:
			s.log.Warn("redis did not confirm the subscription", "err", err)
			s.drop(closeTryAgain)
		}
		return nil, nil, false
	}
	evs, err := h.snapshot(ctx, s.userID)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("reading the order snapshot failed", "err", err)
			s.drop(closeInternal)
		}
		return nil, nil, false
	}
	frames := make([][]byte, 0, len(evs))
	var pending []domain.Event
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			s.log.Error("encoding the order snapshot failed", "order_id", e.OrderID, "err", err)
			s.drop(closeInternal)
			return nil, nil, false
		}
		frames = append(frames, b)
		if e.Status == domain.StatusPending {
			pending = append(pending, e)
		}
	}
	return frames, pending, true
}

// refuse closes a socket that was never opened for its buyer, with a close
// handshake so the client reads why.
func (h *Hub) refuse(conn *websocket.Conn, closeFrame []byte) {
	defer conn.Close()
	if conn.WriteControl(websocket.CloseMessage, closeFrame, time.Now().Add(h.opts.WriteTimeout)) != nil {
		return
	}
	// The client's answering close ends the read; past closeGrace it is
	// not waited for.
	conn.SetReadLimit(h.opts.MaxMessageBytes)
	_ = conn.SetReadDeadline(time.Now().Add(closeGrace))
	for {
		if _, _, err := conn.NextReader(); err != nil {
			return
		}
	}
}

// originAllowed guards against another site's page opening a socket with the
// buyer's credentials. The request's own host is always allowed.
func (h *Hub) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if h.origins[strings.ToLower(origin)] {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}
