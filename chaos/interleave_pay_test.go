package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/payment/builtin"
	"github.com/seckill/seckill/reconcile"
)

// The payment provider's part of TestInterleavings (issue 32, "paid means a
// payment provider said so"): the orders of the priced sales pay at the
// built-in provider, on its hosted page, while a provider nemesis holds,
// delays, duplicates and reorders its notifications, takes its API down or
// rate-limits it, and captures payments after the shop cancelled them. The
// sales priced 0 pay without the provider, as before, so one run covers
// both. At the end the money is checked against the orders: every PAID
// order kept exactly the one capture that paid it, every other capture was
// refunded exactly once, and no capture that paid an order was refunded.

// The built-in provider's secrets in this test.
const (
	interleavePayKey     = "interleave-pay-secret-key"
	interleavePayWebhook = "interleave-pay-webhook-secret"
)

// Kinds of money violations (catMoney), named as the checks report them.
const (
	moneyKeptWithoutPaid = "money-kept-without-paid"
	moneyDoubleRefund    = "double-refund"
	moneyPaidRefunded    = "paid-refunded"
)

var (
	checkoutForm  = regexp.MustCompile(`<form method="post"(?: action="([^"]*)")?>`)
	checkoutToken = regexp.MustCompile(`name="token" value="([^"]+)"`)
)

// startPay makes the built-in payment service the api serves at r.url
// (its notifications retried fast, its test controls on) and the adapter
// the worker and the api use, as seckill dev wires them.
func (r *interleave) startPay(rng *rand.Rand) {
	r.t.Helper()
	svc, err := builtin.New(builtin.Config{
		DB: r.db.DB(), Prefix: api.PayPrefix, BaseURL: r.url, SecretKey: interleavePayKey,
		WebhookURL: r.url + "/v1/payments/builtin/notify", WebhookSecret: interleavePayWebhook,
		RetryMin: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond, Poll: 100 * time.Millisecond, Controls: true,
	})
	if err != nil {
		r.fatalf("builtin payments: %v", err)
	}
	if err := svc.Migrate(context.Background()); err != nil {
		r.fatalf("builtin payments: %v", err)
	}
	c, err := builtin.NewClient(builtin.ClientConfig{BaseURL: r.url + api.PayPrefix, SecretKey: interleavePayKey, WebhookSecret: interleavePayWebhook})
	if err != nil {
		r.fatalf("builtin payments client: %v", err)
	}
	r.pay, r.payments = svc, map[string]payment.Provider{builtin.Name: c}
	// Short, so a provider down at the deadline holds the unit for a
	// while but not past the settling's patience.
	r.payGrace = time.Duration(1500+rng.IntN(1500)) * time.Millisecond
	r.pageHC = &http.Client{Timeout: 30 * time.Second, Transport: r.hc.Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// payOrder is a winner paying: a sale priced 0 pays by the pay request
// alone; a priced sale's pay starts a payment at the provider, completed
// on its hosted page (payAtProvider), its buttons pressed at pressAt if
// set.
func (r *interleave) payOrder(rng *rand.Rand, s *flashSale, user string, id int64, pressAt time.Time) {
	if s.free {
		r.transition(user, id, "pay")
		return
	}
	r.payAtProvider(rng, user, id, pressAt, true)
}

// payAtProvider asks the shop to pay, then on the provider's page mostly
// pays; or declines and (again) pays; or presses "Pay late", which
// captures the payment once the shop cancels it; or leaves the page.
func (r *interleave) payAtProvider(rng *rand.Rand, user string, id int64, pressAt time.Time, mayDecline bool) {
	a := r.transition(user, id, "pay")
	if a.http != http.StatusAccepted || a.page == "" {
		return
	}
	if pressAt.IsZero() {
		pressAt = time.Now().Add(time.Duration(rng.IntN(1200)) * time.Millisecond)
	}
	n := rng.IntN(100)
	if !r.pauseUntil(pressAt) {
		return
	}
	switch {
	case n < 70:
		r.press(user, id, a.payment, a.page, "pay")
	case n < 82 && mayDecline:
		r.press(user, id, a.payment, a.page, "decline")
		if r.pause(time.Duration(rng.IntN(400)) * time.Millisecond) {
			r.payAtProvider(rng, user, id, time.Time{}, false)
		}
	case n < 92:
		r.press(user, id, a.payment, a.page, "pay_late")
	default:
		// Leaves the page: the deadline cancels the payment.
	}
}

// press opens the hosted page as a browser would and presses its button
// action (pay, decline, pay_late), reading the form's target and token
// from the page. The answer is recorded as op "page-<action>": 303 when
// the page sent the buyer back (it did it), else the page's status.
func (r *interleave) press(user string, id int64, paymentID, page, action string) {
	a := answer{op: "page-" + action, user: user, order: id, payment: paymentID, sent: time.Now()}
	code, err := r.submitPage(page, action)
	r.record(a, code, nil, err)
}

func (r *interleave) submitPage(page, action string) (int, error) {
	resp, err := r.pageHC.Get(page)
	if err != nil {
		return 0, err
	}
	html, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	form, token := checkoutForm.FindSubmatch(html), checkoutToken.FindSubmatch(html)
	if resp.StatusCode != http.StatusOK || form == nil || token == nil {
		return resp.StatusCode, nil // nothing to press: the payment is over
	}
	target, err := url.Parse(page)
	if err != nil {
		return 0, err
	}
	if a := string(form[1]); a != "" {
		if target, err = target.Parse(a); err != nil {
			return 0, err
		}
	}
	resp, err = r.pageHC.PostForm(target.String(), url.Values{"token": {string(token[1])}, "action": {action}})
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// providerLoop is the provider nemesis: every so often, for a while, the
// notifications are held (then released, sometimes newest first), delayed,
// duplicated or reordered, or the provider's API answers 503 (down) or 429
// (rate limited). Everything is released when the load ends.
func (r *interleave) providerLoop(rng *rand.Rand) {
	defer r.setControls(builtin.Controls{}, "")
	for r.pause(time.Duration(300+rng.IntN(1200)) * time.Millisecond) {
		var c builtin.Controls
		var kind string
		reorderOnRelease := false
		switch rng.IntN(8) {
		case 0:
			c.NotifyHold, kind = true, "notifications held"
		case 1:
			c.NotifyHold, kind, reorderOnRelease = true, "notifications held, released newest first", true
		case 2:
			c.NotifyDelay, kind = time.Duration(100+rng.IntN(1900))*time.Millisecond, "notifications delayed"
		case 3:
			c.NotifyTwice, kind = true, "notifications duplicated"
		case 4:
			c.NotifyDelay, c.NotifyOutOfOrder, c.NotifyTwice = time.Duration(200+rng.IntN(800))*time.Millisecond, true, true
			kind = "notifications delayed, reordered and duplicated"
		case 5, 6:
			c.APIStatus, kind = http.StatusServiceUnavailable, "provider down (503)"
		case 7:
			c.APIStatus, c.RetryAfter, kind = http.StatusTooManyRequests, time.Second, "provider rate-limited (429)"
		}
		r.setControls(c, kind)
		r.pause(time.Duration(200+rng.IntN(2800)) * time.Millisecond)
		if reorderOnRelease {
			// The hold lifts with the order reversed: what was held goes
			// out newest first.
			r.setControls(builtin.Controls{NotifyOutOfOrder: true}, "")
			r.pause(time.Duration(200+rng.IntN(300)) * time.Millisecond)
		}
		r.setControls(builtin.Controls{}, "")
	}
}

func (r *interleave) setControls(c builtin.Controls, kind string) {
	if err := r.pay.SetControls(c); err != nil {
		r.t.Errorf("seed %d: provider controls: %v", r.seed, err)
	}
	if kind != "" {
		r.mu.Lock()
		r.nemesis[kind]++
		r.mu.Unlock()
	}
}

// lateCaptureLoop captures, now and then, a payment the shop (or its
// window's end) had cancelled: the buyer's money arriving after the order
// gave up on it.
func (r *interleave) lateCaptureLoop(rng *rand.Rand) {
	for r.pause(time.Duration(400+rng.IntN(1600)) * time.Millisecond) {
		ctx := context.Background()
		rows, err := r.db.DB().QueryContext(ctx, `SELECT id FROM builtinpay_payments WHERE state = 'canceled' ORDER BY updated_at DESC LIMIT 50`)
		if err != nil {
			r.t.Errorf("seed %d: read cancelled payments: %v", r.seed, err)
			return
		}
		// Only a payment a buyer holds can be completed, late or not: one a
		// pay handed out. A Reset's run re-applies the accepted pay and
		// starts a payment of its own whose answer goes to nobody; a
		// provider never captures that one (design §4.3, "An earlier run's
		// payment").
		r.mu.Lock()
		held := map[string]bool{}
		for _, a := range r.answers {
			if a.op == "pay" && a.payment != "" {
				held[a.payment] = true
			}
		}
		r.mu.Unlock()
		var ids []string
		for rows.Next() {
			var id string
			if rows.Scan(&id) == nil && held[id] && len(ids) < 20 {
				ids = append(ids, id)
			}
		}
		rows.Close()
		if len(ids) == 0 {
			continue
		}
		id := ids[min(len(ids)-1, int(rng.ExpFloat64()*4))] // mostly the newest
		p, err := r.pay.CaptureLate(ctx, id)
		a := answer{op: "provider-capture-late", user: "provider", order: p.OrderID, payment: id, sent: time.Now()}
		if err == nil {
			a.status = string(p.State)
		}
		r.record(a, 0, nil, err)
	}
}

// settlePayments is the money's part of quiescing, once the orders have
// settled: the nemesis has released everything, so every notification is
// delivered, every pending payment expires at the provider, and the
// settle workflows finish. Then every capture should be kept by the order
// it paid or refunded; if some are neither, one reconciliation pass of the
// provider's captures hands them to their settle workflows, as it would in
// production, and the captures it had to take are noted.
func (r *interleave) settlePayments() {
	ctx := context.Background()
	ok := r.t.Run(fmt.Sprintf("settle_payments_seed_%d", r.seed), func(t *testing.T) {
		testenv.Eventually(t, 2*time.Minute, func() error { return r.paymentsQuiet(ctx) })
	})
	if !ok {
		r.notQuiescent = true
		return
	}
	loose := func() ([]string, error) {
		money, err := r.money(ctx)
		if err != nil {
			return nil, err
		}
		rows, err := r.rows(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, p := range money {
			if p.state == string(payment.Captured) && !(rows[p.order].status == string(domain.StatusPaid) && rows[p.order].paymentID == p.id) {
				out = append(out, fmt.Sprintf("payment %s of order %d (%s)", p.id, p.order, rows[p.order].status))
			}
		}
		return out, nil
	}
	var left []string
	testenv.Eventually(r.t, 30*time.Second, func() (err error) {
		left, err = loose()
		return err
	})
	if len(left) == 0 {
		return
	}
	// Not kept and not refunded, though every notification was
	// delivered and every workflow has closed. Wait a little for a settle
	// workflow visibility may not list yet, then reconcile.
	deadline := time.Now().Add(5 * time.Second)
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond) // polling the provider's records, not synchronising
		left, _ = loose()
	}
	if len(left) == 0 {
		return
	}
	r.reconciledCaptures = left
	rc := &reconcile.Reconciler{Store: r.db, Stock: r.stock, Temporal: r.tc, Providers: r.payments, SettleMargin: time.Millisecond}
	reps, err := rc.Payments(ctx)
	if err != nil {
		r.t.Errorf("seed %d: reconcile the provider's captures: %v", r.seed, err)
	}
	for _, rep := range reps {
		r.t.Logf("seed %d: reconciliation of the captures at %s: listed %d, kept %d, refunded %d, live %d, settling %d, settled %d",
			r.seed, rep.Provider, rep.Listed, rep.Kept, rep.Refunded, rep.Live, len(rep.Settling), rep.Settled)
	}
	r.t.Run(fmt.Sprintf("settle_reconciled_seed_%d", r.seed), func(t *testing.T) {
		testenv.Eventually(t, time.Minute, func() error { return r.paymentsQuiet(ctx) })
	})
}

// paymentsQuiet reports what still moves money: a notification not
// delivered, a payment pending at the provider, a workflow running.
func (r *interleave) paymentsQuiet(ctx context.Context) error {
	db := r.db.DB()
	var undelivered, pending int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM builtinpay_events WHERE delivered_at IS NULL`).Scan(&undelivered); err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM builtinpay_payments WHERE state = 'pending'`).Scan(&pending); err != nil {
		return err
	}
	if undelivered > 0 || pending > 0 {
		return fmt.Errorf("%d notifications not delivered, %d payments pending at the provider", undelivered, pending)
	}
	resp, err := r.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "ExecutionStatus = 'Running'"})
	if err != nil {
		return err
	}
	if n := resp.GetCount(); n > 0 {
		return fmt.Errorf("%d workflows still running (order or payment settle)", n)
	}
	return nil
}

// providerPayment is a payment in the provider's own records.
type providerPayment struct {
	id        string
	order     int64
	state     string
	captured  bool // it was captured at some point (captured_at is set)
	amount    int64
	paid      int64 // captured_minor
	refunds   int
	refundKey string // the refunds' idempotency keys, comma-separated
}

// money reads the provider's payments and their refunds.
func (r *interleave) money(ctx context.Context) (map[string]providerPayment, error) {
	rows, err := r.db.DB().QueryContext(ctx, `SELECT p.id, p.order_id, p.state, p.captured_at IS NOT NULL, p.amount_minor, p.captured_minor,
		(SELECT count(*) FROM builtinpay_refunds f WHERE f.payment_id = p.id),
		COALESCE((SELECT string_agg(f.idempotency_key, ',') FROM builtinpay_refunds f WHERE f.payment_id = p.id), '')
		FROM builtinpay_payments p`)
	if err != nil {
		return nil, fmt.Errorf("read the provider's payments: %w", err)
	}
	defer rows.Close()
	out := map[string]providerPayment{}
	for rows.Next() {
		var p providerPayment
		if err := rows.Scan(&p.id, &p.order, &p.state, &p.captured, &p.amount, &p.paid, &p.refunds, &p.refundKey); err != nil {
			return nil, err
		}
		out[p.id] = p
	}
	return out, rows.Err()
}

// checkMoney: item 5, paid means a payment provider said so, and money
// the shop does not keep goes back once. Every PAID order of a priced sale
// names a capture at the provider that is its own, for its amount, and
// still kept; an order of a sale priced 0 has no payment; every other
// capture was refunded exactly once (under the shop's key,
// refund-<payment id>) and the refund is on its order's row.
func (r *interleave) checkMoney(ctx context.Context, f *final, v *violations) {
	money, err := r.money(ctx)
	if err != nil {
		r.fatalf("%v", err)
	}
	f.money = money
	// The story of an example's order: its answers and its workflow's
	// runs, for the examples the report prints only.
	story := func(kind string, id int64) string {
		if len(v.examples[catMoney+"\x00"+kind]) >= 3 {
			return ""
		}
		return r.storyOf(f, id)
	}
	byOrder := map[int64][]providerPayment{}
	for _, p := range money {
		byOrder[p.order] = append(byOrder[p.order], p)
	}
	for id, row := range f.rows {
		s := r.sale(row.sale)
		if row.status != string(domain.StatusPaid) {
			continue
		}
		if s.free {
			if row.paymentID != "" || len(byOrder[id]) > 0 {
				v.add(catMoney, "free order with a payment", "order %d of %s (sale priced 0) is PAID with payment %q, %d payments at the provider",
					id, row.user, row.paymentID, len(byOrder[id]))
			}
			continue
		}
		p, ok := money[row.paymentID]
		switch {
		case row.paymentID == "":
			v.add(catMoney, "PAID without a payment", "order %d of %s is PAID but names no payment", id, row.user)
		case !ok || p.order != id:
			v.add(catMoney, "PAID by another's payment", "order %d of %s is PAID by payment %s, which the provider has for order %d",
				id, row.user, row.paymentID, p.order)
		case p.state == string(payment.Refunded):
			v.add(catMoney, moneyPaidRefunded, "order %d of %s is PAID by payment %s, which was refunded (%d refunds, keys %s)%s",
				id, row.user, p.id, p.refunds, p.refundKey, story(moneyPaidRefunded, id))
		case p.state != string(payment.Captured):
			v.add(catMoney, "PAID by a payment not captured", "order %d of %s is PAID by payment %s, which is %s at the provider",
				id, row.user, p.id, p.state)
		case p.paid != p.amount || p.amount != int64(s.price):
			v.add(catMoney, "PAID by a wrong amount", "order %d of %s is PAID by payment %s of %d captured %d, the sale's price is %d",
				id, row.user, p.id, p.amount, p.paid, s.price)
		}
	}
	for _, p := range money {
		row, known := f.rows[p.order]
		keeps := known && row.status == string(domain.StatusPaid) && row.paymentID == p.id
		switch {
		case !p.captured && p.refunds > 0:
			v.add(catMoney, "refund of a payment never captured", "payment %s of order %d is %s with %d refunds", p.id, p.order, p.state, p.refunds)
		case !p.captured || keeps:
		case p.state == string(payment.Captured):
			v.add(catMoney, moneyKeptWithoutPaid, "payment %s of order %d (%s, paid by %q) is captured and not refunded%s",
				p.id, p.order, row.status, row.paymentID, story(moneyKeptWithoutPaid, p.order))
		case p.refunds > 1:
			v.add(catMoney, moneyDoubleRefund, "payment %s of order %d (%s) was refunded %d times (keys %s)%s", p.id, p.order, row.status,
				p.refunds, p.refundKey, story(moneyDoubleRefund, p.order))
		case p.refundKey != "refund-"+p.id:
			v.add(catMoney, moneyDoubleRefund, "payment %s of order %d (%s) was refunded under key %q, not the shop's refund-%s",
				p.id, p.order, row.status, p.refundKey, p.id)
		case known && row.refundID == "":
			v.add(catMoney, "refund not on the order", "payment %s of order %d (%s) was refunded, but the order's row records no refund",
				p.id, p.order, row.status)
		}
	}
	for _, c := range r.reconciledCaptures {
		v.notes["a capture neither kept nor refunded once every notification was delivered (the reconciliation refunded it): "+c]++
	}
}

// storyOf is order id's story for a violation's report: every answer
// about it, then its workflow's runs.
func (r *interleave) storyOf(f *final, id int64) string {
	var b strings.Builder
	for _, a := range f.answers {
		if a.order == id || (a.op == "purchase" && a.orderID == id) {
			b.WriteString("\n      " + a.String())
		}
	}
	return b.String() + r.history(id)
}

// paymentOf reads the payment of a pay's answer: its id and hosted page.
func paymentOf(body []byte) (id, page string) {
	var o struct {
		Payment *struct {
			ID          string `json:"id"`
			RedirectURL string `json:"redirect_url"`
		} `json:"payment"`
	}
	if json.Unmarshal(body, &o) != nil || o.Payment == nil {
		return "", ""
	}
	return o.Payment.ID, o.Payment.RedirectURL
}

// handedOut returns, by order, the payments the pay answers handed to the
// buyer (a 202 with a payment).
func handedOut(answers []answer) map[int64][]string {
	out := map[int64][]string{}
	for _, a := range answers {
		if a.op == "pay" && a.payment != "" && !slices.Contains(out[a.order], a.payment) {
			out[a.order] = append(out[a.order], a.payment)
		}
	}
	return out
}

// payNote is a note's text for a pay answer of a priced sale that names no
// payment: a 202 the workflow did not answer within the api's PayWait.
func payNote(a answer) string {
	return strings.TrimSpace(fmt.Sprintf("pay of a priced sale answered %d without a payment (the pay update outlived PayWait)", a.http))
}

// history is a compact account of every run of order id's workflow, for a
// money violation's report: what was scheduled, signalled, updated and
// how each run closed, with the payment events' payment and state.
func (r *interleave) history(id int64) string {
	ctx := context.Background()
	wid := domain.WorkflowID(id)
	resp, err := r.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = '%s'", wid)})
	if err != nil {
		return "history: " + err.Error()
	}
	runs := resp.GetExecutions()
	slices.SortFunc(runs, func(a, b *workflowpb.WorkflowExecutionInfo) int {
		return a.GetStartTime().AsTime().Compare(b.GetStartTime().AsTime())
	})
	var b strings.Builder
	for _, run := range runs {
		fmt.Fprintf(&b, "\n      run %s (%s):", run.GetExecution().GetRunId(), run.GetStatus())
		it := r.tc.GetWorkflowHistory(ctx, wid, run.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				fmt.Fprintf(&b, " (%v)", err)
				break
			}
			if s := eventLine(ev); s != "" {
				fmt.Fprintf(&b, " %d:%s %s;", ev.GetEventId(), ev.GetEventTime().AsTime().Format("05.000"), s)
			}
		}
	}
	return b.String()
}

func eventLine(ev *historypb.HistoryEvent) string {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
		return ""
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		return "schedule " + ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		s := ev.GetWorkflowExecutionSignaledEventAttributes()
		line := "signal " + s.GetSignalName()
		if p := s.GetInput().GetPayloads(); len(p) > 0 {
			var pe struct {
				EventID string
				Payment struct{ ID, State string }
			}
			if json.Unmarshal(p[0].GetData(), &pe) == nil {
				line += fmt.Sprintf("(%s %s %s)", pe.Payment.ID, pe.Payment.State, pe.EventID)
			}
		}
		return line
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		return "update " + ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName()
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		m := ev.GetMarkerRecordedEventAttributes()
		if t := m.GetDetails()["type"]; t != nil && len(t.GetPayloads()) > 0 {
			return "local " + strings.Trim(string(t.GetPayloads()[0].GetData()), `"`)
		}
		return "marker " + m.GetMarkerName()
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		return "activity failed: " + ev.GetActivityTaskFailedEventAttributes().GetFailure().GetMessage()
	}
	return strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")
}
