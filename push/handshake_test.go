package push_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/push"
)

func TestOversizedClientMessageIsRejected(t *testing.T) {
	h := newHarness(t, config{opts: push.Options{MaxMessageBytes: 64}})
	user := h.user("buyer")
	c := h.connect(user)
	if err := c.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("a"), 64)); err != nil {
		t.Fatal(err)
	}
	// A message at the limit is ignored and the socket keeps working.
	h.publish(order(5, user, domain.StatusPaid))
	if e := readEvent(t, c); e.OrderID != "5" {
		t.Fatalf("got order %s, want 5", e.OrderID)
	}
	if err := c.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("a"), 65)); err != nil {
		t.Fatal(err)
	}
	err := readUntilClosed(t, c)
	if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("socket ended with %v, want close 1009 (message too big)", err)
	}
	wantConnections(t, h, 0)
}

func TestOriginCheck(t *testing.T) {
	const shop = "http://shop.example"
	for _, tc := range []struct {
		name    string
		allowed []string
		origin  string // "self" = the server's own origin
		want    int
	}{
		{name: "no origin, not a browser", origin: "", want: http.StatusSwitchingProtocols},
		{name: "same origin by default", origin: "self", want: http.StatusSwitchingProtocols},
		{name: "other origin refused by default", origin: shop, want: http.StatusForbidden},
		{name: "allowed origin", allowed: []string{shop}, origin: shop, want: http.StatusSwitchingProtocols},
		{name: "same origin besides the allowed", allowed: []string{shop}, origin: "self", want: http.StatusSwitchingProtocols},
		{name: "origin not in the list", allowed: []string{shop}, origin: "http://evil.example", want: http.StatusForbidden},
		{name: "allowed host on another port", allowed: []string{shop}, origin: shop + ":8080", want: http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, config{opts: push.Options{AllowedOrigins: tc.allowed}})
			header := http.Header{}
			switch tc.origin {
			case "":
			case "self":
				header.Set("Origin", h.srv.URL)
			default:
				header.Set("Origin", tc.origin)
			}
			c, resp, err := h.dial(h.user("buyer"), "", header, nil)
			if resp == nil {
				t.Fatalf("no handshake response: %v", err)
			}
			if resp.StatusCode != tc.want {
				t.Fatalf("handshake status %d, want %d (err %v)", resp.StatusCode, tc.want, err)
			}
			if c != nil {
				if e := readEvent(t, c); e.OrderID != markerOrder {
					t.Fatalf("got order %s, want the snapshot", e.OrderID)
				}
			}
		})
	}
}

func TestSubprotocolIsEchoed(t *testing.T) {
	h := newHarness(t, config{})
	d := &websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{"seckill.v1", "token.abc"}}
	for _, proto := range []string{"token.abc", ""} {
		c, resp, err := h.dial(h.user("buyer"), proto, nil, d)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != proto || c.Subprotocol() != proto {
			t.Fatalf("selected subprotocol %q (conn %q), want %q", got, c.Subprotocol(), proto)
		}
	}
}
