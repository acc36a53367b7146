package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/seckill/seckill/client"
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
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	events, err := client.New(c.API, c.Token, nil).Watch(ctx)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for e, err := range events {
		if err != nil {
			return err
		}
		if err := enc.Encode(e); err != nil {
			return err
		}
		if c.Until != "" && string(e.Status) == c.Until {
			return nil
		}
	}
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("no %s event within %s", c.Until, c.Timeout)
	}
	if c.Until == "" {
		return nil // interrupted: a normal way to stop watching
	}
	return ctx.Err()
}
