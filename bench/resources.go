package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Memory is what the bench saw of the api's resident memory, read from its
// /metrics (process_resident_memory_bytes), so it works against a remote
// api too. With `seckill dev` the api shares its process with the worker
// and the Temporal server, and the figures are the whole process's.
type Memory struct {
	StartMiB float64 `json:"start_mib"`
	PeakMiB  float64 `json:"peak_mib"`
	// With --websockets: the idle sockets' cost, measured before the sale.
	Websockets         int     `json:"websockets,omitempty"`
	WebsocketsExtraMiB float64 `json:"websockets_extra_mib,omitempty"`
}

// rss reads the api's resident memory in MiB from /metrics.
func (c *target) rss(ctx context.Context) (float64, error) {
	if c.metrics == "" {
		return 0, errors.New("no --metrics-url")
	}
	b, err := scrape(ctx, c.http, c.metrics, "process_resident_memory_bytes")
	return b / (1 << 20), err
}

// watchRSS samples the api's resident memory until ctx ends and returns
// the peak in MiB through peak (as math.Float64bits).
func (c *target) watchRSS(ctx context.Context, peak *atomic.Uint64) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if mib, err := c.rss(ctx); err == nil {
			for {
				old := peak.Load()
				if mib <= math.Float64frombits(old) || peak.CompareAndSwap(old, math.Float64bits(mib)) {
					break
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sockets are idle buyer websockets held open during a run.
type sockets struct {
	conns []*websocket.Conn
	wg    sync.WaitGroup
}

// openSockets opens one websocket per token, parallel dialers at a time.
// Each has a reader that discards what arrives (and so answers pings).
func (c *target) openSockets(ctx context.Context, tokens []string, parallel int) (*sockets, error) {
	ws := "ws" + strings.TrimPrefix(c.base, "http") + "/v1/ws?access_token="
	s := &sockets{conns: make([]*websocket.Conn, len(tokens))}
	var (
		next atomic.Int64
		mu   sync.Mutex
		err  error
		dial sync.WaitGroup
	)
	for range parallel {
		dial.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				mu.Lock()
				failed := err != nil
				mu.Unlock()
				if i >= len(tokens) || failed || ctx.Err() != nil {
					return
				}
				conn, resp, derr := websocket.DefaultDialer.DialContext(ctx, ws+tokens[i], nil)
				if derr != nil {
					mu.Lock()
					if err == nil {
						status := 0
						if resp != nil {
							status = resp.StatusCode
						}
						err = fmt.Errorf("websocket %d of %d: %w (HTTP %d)", i+1, len(tokens), derr, status)
					}
					mu.Unlock()
					return
				}
				s.conns[i] = conn
				s.wg.Go(func() {
					for {
						if _, _, err := conn.NextReader(); err != nil {
							return
						}
					}
				})
			}
		})
	}
	dial.Wait()
	if err != nil {
		s.close()
	}
	return s, err
}

func (s *sockets) close() {
	for _, c := range s.conns {
		if c != nil {
			_ = c.Close()
		}
	}
	s.wg.Wait()
}
