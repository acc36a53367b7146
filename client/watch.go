package client

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/domain"
)

// Watch opens the user's result channel, the websocket /v1/ws, and
// returns its events: first the status of each of the user's orders of the
// last 24 hours, oldest first, then every change as it happens. A refused
// handshake is an *Error.
//
// The sequence ends when ctx ends (with no error) or when the connection
// breaks (its last pair carries the error); leaving the loop closes the
// socket. It can be ranged over once.
func (c *Client) Watch(ctx context.Context) (iter.Seq2[domain.Event, error], error) {
	u, err := url.Parse(c.base + "/v1/ws")
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	// The token travels as a subprotocol, as a browser sends it, so it
	// stays out of URLs and access logs.
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, Subprotocols: []string{"seckill.v1"}}
	if c.token != "" {
		d.Subprotocols = append(d.Subprotocols, "bearer."+c.token)
	}
	conn, resp, err := d.DialContext(ctx, u.String(), nil)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			return nil, refusal(http.MethodGet, "/v1/ws", resp.StatusCode, b)
		}
		return nil, fmt.Errorf("websocket: %w", err)
	}
	return func(yield func(domain.Event, error) bool) {
		defer conn.Close()
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		defer stop()
		for {
			var e domain.Event
			if err := conn.ReadJSON(&e); err != nil {
				if ctx.Err() == nil {
					yield(domain.Event{}, fmt.Errorf("websocket: %w", err))
				}
				return
			}
			if !yield(e, nil) {
				return
			}
		}
	}, nil
}
