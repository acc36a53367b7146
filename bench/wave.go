package bench

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The admission phase: the wave of purchases, timed, with the answers
// counted and their latencies summarized.

// waitUntil waits until t, or until ctx ends.
func waitUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// admit runs the admission wave against the system and records it. It
// returns the accepted orders (order id → token) and when the wave began.
func (c *target) admit(ctx context.Context, r *Result, o Options, saleID string, tokens []string, requests []int) (map[string]string, time.Time, error) {
	endStorm := func() *ReadStorm { return nil }
	if o.ReadStormRate > 0 {
		endStorm = startReadStorm(ctx, c.base, saleID, o.ReadStormRate, o.ReadStormConcurrency)
	}
	w, begin, err := c.wave(ctx, o, saleID, tokens, requests, "admission")
	r.ReadStorm = endStorm()
	r.AdmissionStart = begin
	if err != nil {
		return nil, begin, err
	}
	r.AdmissionSeconds = w.seconds
	r.Outcomes = w.outcomes
	r.Accepted = len(w.accepted)
	r.RequestsPerSec = float64(len(requests)) / r.AdmissionSeconds
	r.Latency = summarize(w.latencies)
	return w.accepted, begin, nil
}

// waveResult is what one admission wave saw.
type waveResult struct {
	seconds   float64
	latencies []time.Duration
	outcomes  map[string]int
	accepted  map[string]string // order id -> token
}

// wave fires the purchases: Concurrency buyers press "buy" in the order of
// requests. The admission and the HTTP limit both run it, so that the
// client side costs the same in both. It returns when the wave began.
func (c *target) wave(ctx context.Context, o Options, saleID string, tokens []string, requests []int, what string) (waveResult, time.Time, error) {
	bar := newBar(o.Progress, len(requests), what)
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		w    = waveResult{latencies: make([]time.Duration, 0, len(requests)), outcomes: map[string]int{}, accepted: map[string]string{}}
	)
	begin := time.Now()
	for range o.Concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(requests) || ctx.Err() != nil {
					return
				}
				tok := tokens[requests[i]]
				t0 := time.Now()
				code, orderID := c.purchase(ctx, saleID, tok)
				d := time.Since(t0)
				mu.Lock()
				w.latencies = append(w.latencies, d)
				w.outcomes[code]++
				if orderID != "" && code == "ACCEPTED" {
					w.accepted[orderID] = tok
				}
				mu.Unlock()
				bar.add()
			}
		})
	}
	wg.Wait()
	w.seconds = time.Since(begin).Seconds()
	bar.finish()
	return w, begin, ctx.Err()
}

func summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		i := int(q * float64(len(ds)-1))
		return float64(ds[i].Microseconds()) / 1000
	}
	return Latency{P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: at(1)}
}
