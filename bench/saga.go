package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The saga phase: wait for every admitted order's row, then pay and
// cancel the chosen fractions through the API.

// awaitCreated follows the stats until every accepted order is at
// AWAITING_PAYMENT, or until deadline.
func (c *target) awaitCreated(ctx context.Context, r *Result, o Options, saleID, admin string, begin, deadline time.Time) {
	bar := newBar(o.Progress, r.Accepted, "orders created")
	for {
		st, err := c.stats(ctx, saleID, admin)
		if err == nil {
			created := st.Orders["AWAITING_PAYMENT"] + st.Orders["PAID"] + st.Orders["CANCELLED"] + st.Orders["EXPIRED"] + st.Orders["FAILED"]
			bar.set(created)
			if created >= r.Accepted && st.Pending == 0 && st.RelayBacklog == 0 {
				r.AllCreated = st.Orders["AWAITING_PAYMENT"] == r.Accepted
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.CreatedSeconds = time.Since(begin).Seconds()
	bar.finish()
	if r.CreatedSeconds > 0 {
		r.OrdersPerSecond = float64(r.Accepted) / r.CreatedSeconds
	}
}

// lifePhases drives the accepted orders through the rest of their life,
// one phase at a time, each measured on its own: paying the asked
// fraction, then cancelling the asked fraction, then (with Expire) the
// rest expiring when the sale's payment window ends. Each phase waits
// for the sale to settle (units back, Redis equal to Postgres) before the
// next begins, until deadline.
func (c *target) lifePhases(ctx context.Context, r *Result, o Options, saleID, admin string, accepted map[string]string, begin, deadline time.Time) {
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	nPay := int(float64(len(ids)) * o.Pay)
	nCancel := int(float64(len(ids)) * o.Cancel)
	ends := time.Now()
	if nPay > 0 {
		r.Paid = c.actPhase(ctx, r, o, saleID, admin, accepted, ids[:nPay], PhasePay, "PAID", deadline)
	}
	if nCancel > 0 {
		r.Cancelled = c.actPhase(ctx, r, o, saleID, admin, accepted, ids[nPay:nPay+nCancel], PhaseCancel, "CANCELLED", deadline)
	}
	if nPay+nCancel > 0 {
		r.EndSeconds = time.Since(ends).Seconds()
	}
	nExpire := len(ids) - nPay - nCancel
	if !o.Expire || nExpire <= 0 {
		return
	}
	// No payment timer can fire before the window has passed since the
	// first purchase: the phase starts there.
	windowEnds := begin.Add(o.PaymentWindow)
	note := ""
	if time.Now().After(windowEnds) {
		note = fmt.Sprintf("the payment window ended %.1f s before paying and cancelling had: expiry overlapped them; give a longer --payment-window",
			time.Since(windowEnds).Seconds())
	}
	if err := waitUntil(ctx, windowEnds); err != nil {
		return
	}
	from := o.probe(ctx)
	bar := newBar(o.Progress, nExpire, "expired")
	settled := c.awaitSettled(ctx, saleID, admin, deadline.Add(o.PaymentWindow), func(st Stats) bool {
		bar.set(st.Orders["EXPIRED"])
		return st.Orders["EXPIRED"] == nExpire
	})
	bar.finish()
	ph := newPhase(PhaseExpire, nExpire, settled && note == "", from, o.probe(ctx), nil, r.cpuUnavailable())
	ph.Note = note
	r.Phases = append(r.Phases, ph)
}

// actPhase runs the pay or cancel phase (name) for ids, as their buyers:
// the requests, then the wait until the sale settles with status counting
// the ones that succeeded; it records the phase and returns that count.
func (c *target) actPhase(ctx context.Context, r *Result, o Options, saleID, admin string, accepted map[string]string, ids []string,
	name, status string, deadline time.Time) int {
	from := o.probe(ctx)
	done, lat := c.act(ctx, accepted, ids, name, o, newBar(o.Progress, len(ids), name))
	settled := c.awaitSettled(ctx, saleID, admin, deadline, func(st Stats) bool { return st.Orders[status] == done })
	r.Phases = append(r.Phases, newPhase(name, len(ids), settled && done == len(ids), from, o.probe(ctx), lat, r.cpuUnavailable()))
	return done
}

// awaitSettled polls the sale's stats until done holds and the sale has
// no drift, or until deadline; it reports whether it got there.
func (c *target) awaitSettled(ctx context.Context, saleID, admin string, deadline time.Time, done func(Stats) bool) bool {
	for {
		st, err := c.stats(ctx, saleID, admin)
		// A cancelled or expired order's row changes before its unit
		// returns (FinishOrder → RestoreStock → ReleaseReservation), so
		// the counts alone are not the end: wait for the stock too.
		if err == nil && done(st) && len(st.drift()) == 0 {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// act pays or cancels (action: PhasePay or PhaseCancel) the orders ids as their buyers, returning how many
// succeeded and every request's time.
func (c *target) act(ctx context.Context, accepted map[string]string, ids []string, action string, o Options, bar *bar) (ok int, lat []time.Duration) {
	jobs := make(chan string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(o.Concurrency, 32) {
		wg.Go(func() {
			for id := range jobs {
				// An outcome not recorded yet (202) is recorded a moment later.
				buyer := c.api.WithToken(accepted[id])
				start := time.Now()
				var err error
				if action == PhasePay {
					_, err = buyer.Pay(ctx, id)
				} else {
					_, err = buyer.Cancel(ctx, id)
				}
				took := time.Since(start)
				mu.Lock()
				lat = append(lat, took)
				if err == nil {
					ok++
				}
				mu.Unlock()
				bar.add()
			}
		})
	}
	for _, id := range ids {
		jobs <- id
	}
	close(jobs)
	wg.Wait()
	bar.finish()
	return ok, lat
}
