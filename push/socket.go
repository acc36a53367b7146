package push

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/events"
)

// closeGrace is how long the server waits for the client's answer to its
// close frame before closing the connection: closing first could make the
// kernel reset the connection and discard frames the client has not read.
const closeGrace = time.Second

// readBufferBytes is a socket's read buffer; frames larger than it are
// still read whole (up to Options.MaxMessageBytes).
const readBufferBytes = 512

var (
	closeGoingAway = websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down")
	closeTryAgain  = websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "order events unavailable, reconnect")
	closeInternal  = websocket.FormatCloseMessage(websocket.CloseInternalServerErr, "order snapshot unavailable, reconnect")
)

// Serve upgrades the request to a websocket of userID, who the caller has
// authenticated, and returns once the user's order snapshot is read; the
// socket then sends it followed by their live events, until either side
// closes, in goroutines of its own (Stop waits for them). A non-empty
// subprotocol is selected in the handshake if the client offered it.
//
// Returning at once lets the HTTP server free what it holds per request
// (its buffers, and a stack grown by the handshake): most sockets sit idle
// for minutes, and ten thousand of them would otherwise keep all of it.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, userID string, subprotocol string) {
	log := h.log.With("user_id", userID)
	if !h.admit() {
		http.Error(w, "server shutting down", http.StatusServiceUnavailable)
		return
	}

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
		h.serving.Done()
		return
	}
	h.conns.Add(1)

	// The request's context ends when Serve returns; the socket's does not.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	s := &socket{
		conn:         conn,
		userID:       userID,
		channel:      events.UserChannel(userID),
		log:          log,
		send:         make(chan []byte, h.opts.SendBuffer),
		done:         make(chan struct{}),
		cancel:       cancel,
		writeTimeout: h.opts.WriteTimeout,
		pingInterval: h.opts.PingInterval,
	}
	s.log.Debug("websocket opened")

	// Reading starts at once, so pongs and a client's close are handled
	// while the snapshot is read, and a client that leaves cancels it.
	conn.SetReadLimit(h.opts.MaxMessageBytes)
	pongWait := 2 * h.opts.PingInterval
	_ = conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(pongWait)) })
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		s.readUntilClosed()
		s.drop(nil)
	}()

	// The snapshot (a database query) is read on this goroutine, whose
	// stack is freed when Serve returns; the writer that lives on starts
	// with a small one.
	frames, ok := h.open(ctx, s)
	go h.live(s, frames, ok, readerDone)
}

// live writes an upgraded socket's snapshot and events until either side
// closes it.
func (h *Hub) live(s *socket, snapshot [][]byte, opened bool, readerDone <-chan struct{}) {
	defer h.serving.Done()
	defer h.conns.Add(-1)
	defer s.cancel()
	if opened {
		s.writeUntilDone(snapshot)
	}
	s.drop(nil)
	s.finish(readerDone)
	h.leave(s)
	s.log.Debug("websocket closed")
}

// open registers s and returns the snapshot frames to send before the live
// events. The subscription is live before the snapshot is read, so an event
// published meanwhile is queued on s rather than lost.
func (h *Hub) open(ctx context.Context, s *socket) ([][]byte, bool) {
	if err := h.join(ctx, s); err != nil {
		s.drop(closeGoingAway)
		return nil, false
	}
	if err := h.awaitSubscribed(ctx); err != nil {
		switch {
		case errors.Is(err, errStopped):
			s.drop(closeGoingAway)
		case ctx.Err() == nil:
			s.log.Warn("redis did not confirm the subscription", "err", err)
			s.drop(closeTryAgain)
		}
		return nil, false
	}
	evs, err := h.snapshot(ctx, s.userID)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("reading the order snapshot failed", "err", err)
			s.drop(closeInternal)
		}
		return nil, false
	}
	frames := make([][]byte, 0, len(evs))
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			s.log.Error("encoding the order snapshot failed", "order_id", e.OrderID, "err", err)
			s.drop(closeInternal)
			return nil, false
		}
		frames = append(frames, b)
	}
	return frames, true
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

// socket is one websocket connection. Its Serve call is the only writer of
// data frames; dispatch only queues them.
type socket struct {
	conn    *websocket.Conn
	userID  string
	channel string
	log     *slog.Logger

	send   chan []byte
	done   chan struct{} // closed by drop: stop writing and close
	cancel context.CancelFunc

	dropOnce   sync.Once
	closeFrame []byte // set by the first drop; nil closes without a close frame

	writeTimeout time.Duration
	pingInterval time.Duration
}

// enqueue queues frame without waiting; false means the buffer is full.
func (s *socket) enqueue(frame []byte) bool {
	select {
	case s.send <- frame:
		return true
	case <-s.done:
		return true // already closing: nothing to deliver, nobody to drop
	default:
		return false
	}
}

// drop ends s. The first reason wins; closeFrame is sent when s closes.
func (s *socket) drop(closeFrame []byte) {
	s.dropOnce.Do(func() {
		s.closeFrame = closeFrame
		close(s.done)
		s.cancel()
	})
}

// dropSlow drops s without a close frame, which would only queue behind the
// backlog that made s slow. Closing the connection also ends a write blocked
// on the client.
func (s *socket) dropSlow() {
	s.drop(nil)
	_ = s.conn.Close()
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

func (s *socket) writeUntilDone(snapshot [][]byte) {
	ping := time.NewTicker(s.pingInterval)
	defer ping.Stop()
	for _, f := range snapshot {
		if err := s.write(f); err != nil {
			s.log.Debug("websocket write failed", "err", err)
			return
		}
	}
	for {
		select {
		case <-s.done:
			return
		case f := <-s.send:
			if err := s.write(f); err != nil {
				s.log.Debug("websocket write failed", "err", err)
				return
			}
		case <-ping.C:
			if err := s.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.writeTimeout)); err != nil {
				s.log.Debug("websocket ping failed", "err", err)
				return
			}
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
func (s *socket) finish(readerDone <-chan struct{}) {
	if s.closeFrame != nil && s.conn.WriteControl(websocket.CloseMessage, s.closeFrame, time.Now().Add(s.writeTimeout)) == nil {
		timer := time.NewTimer(closeGrace)
		select {
		case <-readerDone:
		case <-timer.C:
		}
		timer.Stop()
	}
	_ = s.conn.Close()
	<-readerDone
}
