package activities_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/store"
)

// provider is a payment.Provider that records what it was asked and
// answers err when set.
type provider struct {
	mu      sync.Mutex
	err     error
	creates []payment.CreateRequest
	refunds map[string]payment.Refund // by key
	sealer  *payment.Sealer
}

func (p *provider) Name() string { return "fake" }

func (p *provider) Sealer() *payment.Sealer { return p.sealer }

func (p *provider) fail() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *provider) Create(_ context.Context, req payment.CreateRequest) (payment.Payment, error) {
	if err := p.fail(); err != nil {
		return payment.Payment{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creates = append(p.creates, req)
	return payment.Payment{Provider: "fake", ID: "pay-" + req.Key, OrderID: req.OrderID, Amount: req.Amount, State: payment.Pending,
		RedirectURL: "https://pay.example/" + req.Key}, nil
}

func (p *provider) Get(context.Context, string) (payment.Payment, error) {
	return payment.Payment{}, errors.New("not used")
}

func (p *provider) Cancel(_ context.Context, id string) (payment.Payment, error) {
	if err := p.fail(); err != nil {
		return payment.Payment{}, err
	}
	return payment.Payment{Provider: "fake", ID: id, State: payment.Canceled, RedirectURL: "https://pay.example/" + id}, nil
}

func (p *provider) Refund(_ context.Context, paymentID, key, _ string) (payment.Refund, error) {
	if err := p.fail(); err != nil {
		return payment.Refund{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.refunds[key]; ok {
		return r, nil
	}
	r := payment.Refund{Provider: "fake", ID: fmt.Sprintf("re-%d", len(p.refunds)+1), PaymentID: paymentID, State: payment.RefundSucceeded}
	p.refunds[key] = r
	return r, nil
}

func (p *provider) Captured(context.Context, time.Time, time.Time) ([]payment.Payment, error) {
	return nil, nil
}

func (p *provider) Verify(http.Header, []byte, time.Time) (payment.Event, error) {
	return payment.Event{}, payment.ErrIgnored
}

func newPaymentEnv(t *testing.T) (*testsuite.TestActivityEnvironment, *provider, *store.Store) {
	t.Helper()
	st := testenv.Store(t)
	sealer, err := payment.NewSealer("fake", "fake-secret-key")
	if err != nil {
		t.Fatal(err)
	}
	prov := &provider{refunds: map[string]payment.Refund{}, sealer: sealer}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Activities{Store: st, Payments: map[string]payment.Provider{"fake": prov}})
	return env, prov, st
}

func placedOrder(t *testing.T, st *store.Store, id int64, currency string) domain.OrderRef {
	t.Helper()
	ctx := context.Background()
	s, err := st.CreateSale(ctx, store.NewSale{Name: "phone", PriceCents: 1999, Currency: currency, Stock: 5,
		StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	ref := domain.OrderRef{OrderID: id, SaleID: s.ID, UserID: "buyer", AmountCents: 1999}
	if err := st.PlaceOrder(ctx, ref); err != nil {
		t.Fatal(err)
	}
	return ref
}

// A payment attempt is created for the order's amount in its sale's
// currency, under a key per order, attempt and payment window: the same
// attempt of a run made by a Reset, in a window of its own, is another
// payment.
func TestStartPaymentAsksForTheOrdersMoney(t *testing.T) {
	env, prov, st := newPaymentEnv(t)
	ref := placedOrder(t, st, 51, "EUR")
	expires := time.UnixMilli(1795742852167).UTC()
	v, err := env.ExecuteActivity("StartPayment", activities.StartPaymentInput{Ref: ref, Provider: "fake", Attempt: 2,
		ReturnURL: "https://shop.example/orders/51", ExpiresAt: expires})
	if err != nil {
		t.Fatal(err)
	}
	const key = "order-51-2-1795742852167"
	var p payment.Payment
	if err := v.Get(&p); err != nil || p.ID != "pay-"+key {
		t.Fatalf("payment = %+v, %v", p, err)
	}
	// The hosted page's URL is answered sealed for this order and
	// payment, never plain: the answer is kept in the order's history.
	if p.RedirectURL != "" || p.ClientSecret != "" || p.SealedAction == "" {
		t.Fatalf("payment = %+v, want its client action sealed and no plain one", p)
	}
	if a, err := prov.sealer.Open(51, p.ID, p.SealedAction); err != nil || a.RedirectURL != "https://pay.example/"+key {
		t.Fatalf("sealed action opens to %+v, %v; want the page https://pay.example/%s", a, err, key)
	}
	got := prov.creates[0]
	if got.Amount != (payment.Money{Minor: 1999, Currency: "EUR"}) || got.Key != key || got.OrderID != 51 ||
		got.SaleID != ref.SaleID || got.UserID != "buyer" || got.ReturnURL != "https://shop.example/orders/51" || !got.ExpiresAt.Equal(expires) {
		t.Fatalf("create request = %+v", got)
	}
	if _, err := env.ExecuteActivity("StartPayment", activities.StartPaymentInput{Ref: ref, Provider: "fake", Attempt: 2,
		ReturnURL: "https://shop.example/orders/51", ExpiresAt: expires.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if again := prov.creates[len(prov.creates)-1]; again.Key == key {
		t.Fatalf("attempt 2 in another payment window asked under the same key %s", key)
	}
}

// A cancel's answer carries no client action: the workflow keeps it in
// its history and hands none out from it.
func TestCancelPaymentAnswersNoClientAction(t *testing.T) {
	env, _, _ := newPaymentEnv(t)
	v, err := env.ExecuteActivity("CancelPayment", activities.PaymentRefIn{Provider: "fake", PaymentID: "pay-1"})
	if err != nil {
		t.Fatal(err)
	}
	var p payment.Payment
	if err := v.Get(&p); err != nil || p.State != payment.Canceled || p.RedirectURL != "" || p.SealedAction != "" {
		t.Fatalf("cancel answered %+v, %v; want canceled, with no client action", p, err)
	}
}

// A provider's answers become the activity's errors: a rate limit retried
// after its Retry-After, an unreachable provider retried, a refusal and an
// unknown payment not retried, and a provider not configured refused.
func TestPaymentErrorsAreClassified(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		provider  string
		wantType  string // "" : a retryable error of no payment type
		retryable bool
		delay     time.Duration
	}{
		{"rate limited", &payment.RateLimitedError{Provider: "fake", RetryAfter: 3 * time.Second}, "fake", activities.ErrTypePaymentRateLimited, true, 3 * time.Second},
		{"unavailable", fmt.Errorf("fake: 503: %w", payment.ErrUnavailable), "fake", "", true, 0},
		{"rejected", fmt.Errorf("fake: 400: %w", payment.ErrRejected), "fake", activities.ErrTypePaymentRejected, false, 0},
		{"not found", fmt.Errorf("fake: 404: %w", payment.ErrNotFound), "fake", activities.ErrTypePaymentRejected, false, 0},
		{"no such provider", nil, "nope", activities.ErrTypePaymentRejected, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, prov, _ := newPaymentEnv(t)
			prov.err = tc.err
			_, err := env.ExecuteActivity("CancelPayment", activities.PaymentRefIn{Provider: tc.provider, PaymentID: "pay-1"})
			var app *temporal.ApplicationError
			if !errors.As(err, &app) {
				t.Fatalf("error = %v, want an application error", err)
			}
			if tc.wantType != "" && app.Type() != tc.wantType {
				t.Errorf("type = %s, want %s", app.Type(), tc.wantType)
			}
			if app.NonRetryable() == tc.retryable {
				t.Errorf("non-retryable = %v, want %v", app.NonRetryable(), !tc.retryable)
			}
			if app.NextRetryDelay() != tc.delay {
				t.Errorf("next retry delay = %s, want %s", app.NextRetryDelay(), tc.delay)
			}
		})
	}
}

// A refund is asked under the payment's key and recorded on the order's
// row; a retry is the same refund, recorded once.
func TestRefundPaymentOnceAndRecorded(t *testing.T) {
	env, prov, st := newPaymentEnv(t)
	ref := placedOrder(t, st, 52, "USD")
	if _, _, err := st.EndOrder(context.Background(), ref, domain.StatusExpired, "payment timeout"); err != nil {
		t.Fatal(err)
	}
	in := activities.RefundInput{Ref: ref, Provider: "fake", PaymentID: "pay-late", Reason: "captured after the order expired"}
	for range 2 {
		v, err := env.ExecuteActivity("RefundPayment", in)
		if err != nil {
			t.Fatal(err)
		}
		var r payment.Refund
		if err := v.Get(&r); err != nil || r.ID != "re-1" {
			t.Fatalf("refund = %+v, %v; want re-1", r, err)
		}
	}
	if _, ok := prov.refunds["refund-pay-late"]; !ok || len(prov.refunds) != 1 {
		t.Fatalf("refunds at the provider = %v, want one under refund-pay-late", prov.refunds)
	}
	o, err := st.Order(context.Background(), 52)
	if err != nil || o.RefundID != "re-1" || o.RefundReason != in.Reason || o.PaymentID != "pay-late" || o.PaymentProvider != "fake" {
		t.Fatalf("order = %+v, %v", o, err)
	}
}

// MarkPaidWith records the provider's payment on the paid row.
func TestMarkPaidWithRecordsThePayment(t *testing.T) {
	env, _, st := newPaymentEnv(t)
	ref := placedOrder(t, st, 53, "USD")
	if _, err := env.ExecuteActivity("MarkPaidWith", activities.PaidInput{Ref: ref, Provider: "fake", PaymentID: "pay-53"}); err != nil {
		t.Fatal(err)
	}
	o, err := st.Order(context.Background(), 53)
	if err != nil || o.Status != "PAID" || o.PaymentID != "pay-53" || o.PaymentProvider != "fake" {
		t.Fatalf("order = %+v, %v", o, err)
	}
}
