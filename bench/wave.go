package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/seckill/seckill/api/wire"
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
// returns what the wave saw and when it began.
func (c *target) admit(ctx context.Context, r *Result, o Options, saleID string, tokens []string, requests []int) (waveResult, time.Time, error) {
	endStorm := func() *ReadStorm { return nil }
	if o.ReadStormRate > 0 {
		endStorm = startReadStorm(ctx, c.base, saleID, o.ReadStormRate, o.ReadStormConcurrency)
	}
	w, begin, err := c.wave(ctx, o, saleID, tokens, requests, "admission")
	r.ReadStorm = endStorm()
	r.AdmissionStart = begin
	if err != nil {
		return w, begin, err
	}
	r.AdmissionSeconds = w.seconds
	r.Outcomes = w.outcomes
	r.Accepted = len(w.accepted)
	r.RequestsPerSec = float64(len(requests)) / r.AdmissionSeconds
	r.Latency = summarize(w.latencies)
	if u := w.unavailable; o.RetryUnavailable || len(u.Answers) > 0 {
		if o.RetryUnavailable {
			u.RetryForSeconds = o.RetryFor.Seconds()
		}
		r.Unavailable = &u
	}
	return w, begin, nil
}

// countHeld counts the purchases answered UNCONFIRMED at the end whose
// unit was taken all the same (Result.HeldUnconfirmed): their order is
// there when read as their buyer. An unconfirmed reservation reads as not
// there until a replica holds it, so the count is made once nothing is on
// its way (after every order is created, or after the wave with
// AdmissionOnly), and whether every order was created is then judged with
// them counted.
func (c *target) countHeld(ctx context.Context, r *Result, o Options, saleID, admin string, unconfirmed, userOf map[string]string) error {
	if len(unconfirmed) > 0 {
		list := make([]Accepted, 0, len(unconfirmed))
		for id, tok := range unconfirmed {
			list = append(list, Accepted{SaleID: saleID, OrderID: id, UserID: userOf[tok]})
		}
		gone, err := VerifyAccepted(ctx, o.Target, o.Signer, list, o.Concurrency)
		if err != nil {
			return fmt.Errorf("read the orders of the purchases left unconfirmed: %w", err)
		}
		r.HeldUnconfirmed = gone.Checked - gone.Lost
	}
	if r.Unavailable != nil {
		r.Unavailable.UnitsUnsold = max(0, r.Stock-r.orders())
	}
	if r.HeldUnconfirmed == 0 || o.AdmissionOnly {
		return nil
	}
	st, err := c.stats(ctx, saleID, admin)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	r.AllCreated = st.Orders["AWAITING_PAYMENT"] == r.orders()
	if r.CreatedSeconds > 0 {
		r.OrdersPerSecond = float64(r.orders()) / r.CreatedSeconds
	}
	return nil
}

// waveResult is what one admission wave saw.
type waveResult struct {
	seconds     float64
	latencies   []time.Duration   // of every request sent, retries too
	outcomes    map[string]int    // the final answer of each request
	accepted    map[string]string // order id -> token
	unavailable Unavailable
	// unconfirmed are the requests whose final answer was UNCONFIRMED:
	// the order each would have if its unit was taken -> token.
	unconfirmed map[string]string
}

// wave fires the purchases: Concurrency buyers press "buy" in the order of
// requests. The admission and the HTTP limit both run it, so that the
// client side costs the same in both. With RetryUnavailable, a request
// answered 503 is sent again with its Idempotency-Key after the answer's
// Retry-After, while that falls within RetryFor of the wave's start; a
// buyer waiting to retry holds no place among the Concurrency in flight.
// The wave ends when every request has its final answer or has given up.
// It returns when the wave began.
func (c *target) wave(ctx context.Context, o Options, saleID string, tokens []string, requests []int, what string) (waveResult, time.Time, error) {
	bar := newBar(o.Progress, len(requests), what)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
		q  = newQueue(len(requests))
		w  = waveResult{latencies: make([]time.Duration, 0, len(requests)), outcomes: map[string]int{}, accepted: map[string]string{},
			unavailable: Unavailable{Answers: map[string]int{}}, unconfirmed: map[string]string{}}
	)
	begin := time.Now()
	deadline := begin.Add(o.RetryFor)
	// Each request's own key, the same on each of its retries; unique to
	// the run, so that no earlier run's key answers for it.
	keyOf := func(int) string { return "" }
	if o.RetryUnavailable {
		run := fmt.Sprintf("bench-%x", begin.UnixNano())
		keyOf = func(i int) string { return run + "-" + strconv.Itoa(i) }
	}
	for range o.Concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				i, retry, ok := q.take(ctx.Done())
				if !ok {
					return
				}
				tok := tokens[requests[i]]
				t0 := time.Now()
				a := c.purchase(ctx, saleID, tok, keyOf(i))
				answered := time.Now()
				wait := retryDelay(a.retryAfter)
				again := o.RetryUnavailable && a.unavailable && answered.Add(wait).Before(deadline) && ctx.Err() == nil
				mu.Lock()
				w.latencies = append(w.latencies, answered.Sub(t0))
				if retry {
					w.unavailable.Retries++
				}
				if a.unavailable {
					w.unavailable.note(a.code, answered.Sub(begin))
				}
				if !again {
					w.outcomes[a.code]++
					switch {
					case a.orderID == "":
					case a.code == "ACCEPTED":
						w.accepted[a.orderID] = tok
					case a.code == wire.CodeUnconfirmed:
						w.unconfirmed[a.orderID] = tok
					}
					if a.unavailable && o.RetryUnavailable {
						w.unavailable.GaveUp++
					}
				}
				mu.Unlock()
				if again {
					q.retryAfter(i, wait)
					continue
				}
				q.settle()
				bar.add()
			}
		})
	}
	wg.Wait()
	// A buyer's second press may have been told UNCONFIRMED of the order
	// another answered 202: it is counted once, as accepted.
	for id := range w.accepted {
		delete(w.unconfirmed, id)
	}
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
