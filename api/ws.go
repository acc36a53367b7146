package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
)

// tokenProtocol is the Sec-WebSocket-Protocol prefix that carries a token,
// for browsers, which cannot set an Authorization header on a websocket:
// new WebSocket(url, ["seckill.v1", "bearer." + token]).
const tokenProtocol = "bearer."

// serveWS authenticates a websocket request and hands it to the hub. The
// token comes from ?access_token=, the Sec-WebSocket-Protocol header or an
// Authorization header; the socket lives no longer than the token
// (push.CloseTokenExpired).
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("access_token")
	selected := ""
	for _, p := range websocketProtocols(r) {
		if t, ok := strings.CutPrefix(p, tokenProtocol); ok && token == "" {
			token = t
		} else if p == "seckill.v1" {
			selected = p
		}
	}
	if token == "" {
		token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	user, err := s.deps.Signer.Verify(token)
	if err != nil {
		writeProblem(w, problem(http.StatusUnauthorized, wire.CodeUnauthorized, "a valid token is required"))
		return
	}
	// A reconnect storm from one buyer (a buggy client in a loop) must not
	// cost a Redis subscription and a snapshot query each time.
	err = s.orders.Allow(r.Context(), "ws:"+user.ID, s.cfg.WSConnectRate)
	if err == nil {
		err = s.orders.Allow(r.Context(), "ws-ip:"+s.clientIP(r.RemoteAddr, r.Header.Get("X-Forwarded-For")), s.cfg.IPRate)
	}
	if err != nil {
		err = toHTTP(r.Context(), err) // 429 with Retry-After, or 503
		p := problemFor(err)
		var hdr interface{ GetHeaders() http.Header }
		if errors.As(err, &hdr) {
			for k, v := range hdr.GetHeaders() {
				w.Header()[k] = v
			}
		}
		writeProblem(w, p)
		return
	}
	s.hub.Serve(w, r, user.ID, user.Expires, selected)
}

func websocketProtocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// snapshot is what a socket receives on connect: the current status of
// the user's orders of the last 24 hours, oldest first, so a result
// produced before the socket opened is not lost.
func (s *Server) snapshot(ctx context.Context, userID string) ([]domain.Event, error) {
	list, _, err := s.orders.List(ctx, userID, time.Now().Add(-24*time.Hour), 0, 200)
	if err != nil {
		return nil, err
	}
	events := make([]domain.Event, 0, len(list))
	for i := len(list) - 1; i >= 0; i-- {
		o := list[i]
		events = append(events, domain.Event{
			Type: "order", OrderID: strconv.FormatInt(o.ID, 10), SaleID: strconv.FormatInt(o.SaleID, 10), UserID: o.UserID,
			Status: o.Status, Reason: o.Reason, At: o.UpdatedAt,
			QueuePosition: o.Place.Position, ETASeconds: o.Place.ETASeconds,
		})
	}
	return events, nil
}
