package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/seckill/seckill/domain"
)

// WatchCmd opens a buyer's result websocket and prints each order event as
// a JSON line: the command-line twin of the demo page's socket.
type WatchCmd struct {
	API     string        `name:"api" env:"SECKILL_API" default:"http://127.0.0.1:8080" help:"Base URL of the api."`
	Token   string        `name:"token" env:"SECKILL_TOKEN" required:"" help:"The buyer's bearer token."`
	Until   string        `name:"until" help:"Exit 0 once an event with this status arrives (e.g. PAID)."`
	Timeout time.Duration `name:"timeout" default:"2m" help:"Give up (exit 1) after this long."`
}

func (c *WatchCmd) Run(ctx context.Context) error {
	u, err := url.Parse(strings.TrimRight(c.API, "/") + "/v1/ws")
	if err != nil {
		return fmt.Errorf("--api: %w", err)
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	// The token travels as a subprotocol, as a browser would send it, so it
	// stays out of URLs and access logs.
	d := websocket.Dialer{Subprotocols: []string{"seckill.v1", "bearer." + c.Token}, HandshakeTimeout: 10 * time.Second}
	conn, resp, err := d.DialContext(ctx, u.String(), http.Header{})
	if err != nil {
		if resp != nil {
			return fmt.Errorf("websocket: %s", resp.Status)
		}
		return fmt.Errorf("websocket: %w", err)
	}
	defer conn.Close()
	go func() { <-ctx.Done(); conn.Close() }()
	enc := json.NewEncoder(os.Stdout)
	for {
		var e domain.Event
		if err := conn.ReadJSON(&e); err != nil {
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("no %s event within %s", c.Until, c.Timeout)
			}
			if ctx.Err() != nil && c.Until == "" {
				return nil // interrupted: a normal way to stop watching
			}
			return fmt.Errorf("websocket: %w", err)
		}
		if err := enc.Encode(e); err != nil {
			return err
		}
		if c.Until != "" && string(e.Status) == c.Until {
			return nil
		}
	}
}
