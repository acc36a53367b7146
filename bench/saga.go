package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seckill/seckill/client"
)

// The saga phase: wait for every admitted order's row, then pay and
// cancel the chosen fractions through the API (paying at the provider's
// hosted page where the api takes payments at one: checkout.go).

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
// next begins, until deadline. Its error is a pay the bench cannot
// complete (ErrUnpayable).
func (c *target) lifePhases(ctx context.Context, r *Result, o Options, saleID, admin string, accepted map[string]string, begin, deadline time.Time) error {
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	nPay := int(float64(len(ids)) * o.Pay)
	nCancel := int(float64(len(ids)) * o.Cancel)
	ends := time.Now()
	var err error
	if nPay > 0 {
		if r.Paid, err = c.actPhase(ctx, r, o, saleID, admin, accepted, ids[:nPay], PhasePay, "PAID", deadline); err != nil {
			return err
		}
	}
	if nCancel > 0 {
		if r.Cancelled, err = c.actPhase(ctx, r, o, saleID, admin, accepted, ids[nPay:nPay+nCancel], PhaseCancel, "CANCELLED", deadline); err != nil {
			return err
		}
	}
	if nPay+nCancel > 0 {
		r.EndSeconds = time.Since(ends).Seconds()
	}
	nExpire := len(ids) - nPay - nCancel
	if !o.Expire || nExpire <= 0 {
		return nil
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
		return nil
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
	return nil
}

// actPhase runs the pay or cancel phase (name) for ids, as their buyers:
// the requests (and, for a pay at a provider, the buyer's steps on its
// hosted page), then the wait until the sale settles with status counting
// the ones that succeeded; it records the phase and returns how many
// reached status (paid at a provider: read PAID after the phase).
func (c *target) actPhase(ctx context.Context, r *Result, o Options, saleID, admin string, accepted map[string]string, ids []string,
	name, status string, deadline time.Time) (int, error) {
	from := o.probe(ctx)
	a, err := c.act(ctx, accepted, ids, name, o, newBar(o.Progress, len(ids), name))
	if err != nil {
		return 0, err
	}
	settled := c.awaitSettled(ctx, saleID, admin, deadline, func(st Stats) bool { return st.Orders[status] == a.ok })
	ph := newPhase(name, len(ids), settled && a.ok == len(ids), from, o.probe(ctx), a.lat, r.cpuUnavailable())
	done := a.ok
	if a.provider != "" {
		// Read after the phase's last probe: the reads are not the
		// phase's cost.
		ph.Payment = c.paymentFigures(ctx, accepted, a, o.Concurrency)
		done = ph.Payment.Paid
		if ph.Payment.skewed > 0 {
			ph.Note = fmt.Sprintf("%d orders' paid_at is before the bench saw their capture answered: the clock of the worker that recorded them is not the bench's, so capture_to_paid is off by as much",
				ph.Payment.skewed)
		}
	}
	r.Phases = append(r.Phases, ph)
	return done, nil
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

// acted is what the buyers of a pay or cancel phase did.
type acted struct {
	ok  int             // succeeded: answered 2xx, or at a provider, the Pay form answered with the way back
	lat []time.Duration // the pay or cancel requests' times
	// At a payment provider (provider not empty): each step's times, when
	// each order's capture was answered, and the failures by step.
	provider     string
	page, submit []time.Duration
	captured     map[string]time.Time
	failed       map[string]int
	failedSample string
}

func (a *acted) fail(step string, err error) {
	if a.failed == nil {
		a.failed = map[string]int{}
	}
	a.failed[step]++
	if a.failedSample == "" {
		a.failedSample = step + ": " + err.Error()
	}
}

// act pays or cancels (action: PhasePay or PhaseCancel) the orders ids as
// their buyers. A pay whose answer names a payment at a provider is
// completed on the provider's hosted page (checkout); one the bench
// cannot complete stops the phase with ErrUnpayable rather than count
// orders that will never be paid.
func (c *target) act(ctx context.Context, accepted map[string]string, ids []string, action string, o Options, bar *bar) (acted, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	a := acted{captured: map[string]time.Time{}}
	var unpayable error
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
				var out client.Outcome
				if action == PhasePay {
					out, err = buyer.Pay(ctx, id)
				} else {
					out, err = buyer.Cancel(ctx, id)
				}
				took := time.Since(start)
				pay := out.Order.Payment
				var ck checkoutTimes
				var ckErr *checkoutError
				if err == nil && pay != nil {
					if err = payable(pay); err == nil {
						ck, err = c.checkout(ctx, pay.RedirectURL)
					}
				}
				mu.Lock()
				a.lat = append(a.lat, took)
				switch {
				case pay != nil && errors.Is(err, ErrUnpayable):
					if unpayable == nil {
						unpayable = fmt.Errorf("pay order %s: %w", id, err)
					}
					stop()
				case pay != nil:
					a.provider = pay.Provider
					if ck.page > 0 {
						a.page = append(a.page, ck.page)
					}
					if ck.submit > 0 {
						a.submit = append(a.submit, ck.submit)
					}
					if errors.As(err, &ckErr) {
						a.fail(ckErr.step, err)
					} else {
						a.ok++
						a.captured[id] = ck.captured
					}
				case err == nil:
					a.ok++
				case action == PhasePay && ctx.Err() == nil:
					a.fail("pay", err)
				}
				mu.Unlock()
				bar.add()
			}
		})
	}
feed:
	for _, id := range ids {
		select {
		case jobs <- id:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	bar.finish()
	if unpayable != nil {
		return a, unpayable
	}
	return a, nil
}

// paymentFigures reads, as their buyers, the orders whose capture was
// answered: how many are PAID, and how long from the capture's answer to
// their paid_at (the provider's notification, the order's workflow, its
// row).
func (c *target) paymentFigures(ctx context.Context, accepted map[string]string, a acted, concurrency int) *PhasePayment {
	p := &PhasePayment{Provider: a.provider, Page: summarize(a.page), Submit: summarize(a.submit), Failed: a.failed, FailedSample: a.failedSample}
	jobs := make(chan string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var toPaid []time.Duration
	notPaid := 0
	for range min(concurrency, 32) {
		wg.Go(func() {
			for id := range jobs {
				o, err := c.api.WithToken(accepted[id]).Order(ctx, id)
				mu.Lock()
				if err == nil && o.Status == "PAID" && o.PaidAt != nil {
					p.Paid++
					d := o.PaidAt.Sub(a.captured[id])
					if d < 0 {
						p.skewed++
					}
					toPaid = append(toPaid, d)
				} else {
					notPaid++
				}
				mu.Unlock()
			}
		})
	}
	for id := range a.captured {
		jobs <- id
	}
	close(jobs)
	wg.Wait()
	if len(toPaid) > 0 {
		l := summarize(toPaid)
		p.CaptureToPaid = &l
	}
	if notPaid > 0 {
		if p.Failed == nil {
			p.Failed = map[string]int{}
		}
		p.Failed["paid"] = notPaid
	}
	return p
}
