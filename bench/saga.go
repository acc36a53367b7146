package bench

import (
	"context"
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

// payAndCancel pays and cancels the asked fractions of the accepted
// orders, driving their sagas to their ends, and waits for the sale to
// settle, until deadline.
func (c *target) payAndCancel(ctx context.Context, r *Result, o Options, saleID, admin string, accepted map[string]string, deadline time.Time) {
	if o.Pay <= 0 && o.Cancel <= 0 {
		return
	}
	ends := time.Now()
	r.Paid, r.Cancelled = c.settle(ctx, accepted, o, newBar(o.Progress, int(float64(r.Accepted)*(o.Pay+o.Cancel)), "pay/cancel"))
	for time.Now().Before(deadline) && ctx.Err() == nil {
		st, err := c.stats(ctx, saleID, admin)
		// A cancelled order's row changes before its unit returns
		// (FinishOrder → RestoreStock → ReleaseReservation), so the
		// counts alone are not the end: wait for the stock to settle too.
		if err == nil && st.Orders["PAID"] == r.Paid && st.Orders["CANCELLED"] == r.Cancelled && len(st.drift()) == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.EndSeconds = time.Since(ends).Seconds()
}

// settle pays and cancels the asked fractions of the accepted orders.
func (c *target) settle(ctx context.Context, accepted map[string]string, o Options, bar *bar) (paid, cancelled int) {
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	nPay := int(float64(len(ids)) * o.Pay)
	nCancel := int(float64(len(ids)) * o.Cancel)
	type job struct{ id, action string }
	jobs := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(o.Concurrency, 32) {
		wg.Go(func() {
			for j := range jobs {
				// An outcome not recorded yet (202) is recorded a moment later.
				buyer := c.api.WithToken(accepted[j.id])
				var err error
				if j.action == "pay" {
					_, err = buyer.Pay(ctx, j.id)
				} else {
					_, err = buyer.Cancel(ctx, j.id)
				}
				mu.Lock()
				if err == nil && j.action == "pay" {
					paid++
				} else if err == nil {
					cancelled++
				}
				mu.Unlock()
				bar.add()
			}
		})
	}
	for i, id := range ids[:nPay+nCancel] {
		action := "pay"
		if i >= nPay {
			action = "cancel"
		}
		jobs <- job{id, action}
	}
	close(jobs)
	wg.Wait()
	bar.finish()
	return paid, cancelled
}
