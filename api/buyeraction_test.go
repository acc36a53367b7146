package api

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/workflows"
)

// gettable is a provider known only by its sealer and its Get.
type gettable struct {
	payment.Provider
	sealer *payment.Sealer
	get    func(id string) (payment.Payment, error)
}

func (p gettable) Sealer() *payment.Sealer { return p.sealer }

func (p gettable) Get(_ context.Context, id string) (payment.Payment, error) { return p.get(id) }

// The pay's answer as the buyer gets it, for each kind of payment the
// order's workflow answers: one started before the seal passes plain, as
// it is; a sealed one is opened; one whose seal does not open is read at
// the provider, and when that read fails, or answers a payment of another
// order or with nothing to pay with, the pay answers 503 with
// Retry-After, never another order's page.
func TestBuyerActionOpensPassesOrReads(t *testing.T) {
	worker, err := payment.NewSealer("fake", "key-of-the-worker")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := payment.NewSealer("fake", "key-after-the-rotation")
	if err != nil {
		t.Fatal(err)
	}
	const page = "https://pay.example/checkout/pay-1"
	sealed, err := worker.Seal(7, "pay-1", payment.ClientAction{RedirectURL: page})
	if err != nil {
		t.Fatal(err)
	}
	atProvider := func(p payment.Payment, err error) func(string) (payment.Payment, error) {
		return func(string) (payment.Payment, error) { return p, err }
	}
	noGet := atProvider(payment.Payment{}, errors.New("not read"))
	for _, tc := range []struct {
		name   string
		action workflows.PaymentAction
		sealer *payment.Sealer
		get    func(string) (payment.Payment, error)
		want   string // the page answered; "" : 503
	}{
		{"plain, from before the seal", workflows.PaymentAction{Provider: "fake", ID: "pay-1", RedirectURL: page}, worker, noGet, page},
		{"sealed", workflows.PaymentAction{Provider: "fake", ID: "pay-1", Sealed: sealed}, worker, noGet, page},
		{"sealed under the old key, read at the provider", workflows.PaymentAction{Provider: "fake", ID: "pay-1", Sealed: sealed}, rotated,
			atProvider(payment.Payment{ID: "pay-1", OrderID: 7, RedirectURL: page}, nil), page},
		{"unopenable, the provider down", workflows.PaymentAction{Provider: "fake", ID: "pay-1", Sealed: sealed}, rotated,
			atProvider(payment.Payment{}, payment.ErrUnavailable), ""},
		{"unopenable, another order's payment", workflows.PaymentAction{Provider: "fake", ID: "pay-1", Sealed: sealed}, rotated,
			atProvider(payment.Payment{ID: "pay-1", OrderID: 8, RedirectURL: page}, nil), ""},
		{"unopenable, nothing to pay with", workflows.PaymentAction{Provider: "fake", ID: "pay-1", Sealed: sealed}, rotated,
			atProvider(payment.Payment{ID: "pay-1", OrderID: 7}, nil), ""},
		{"sealed, of a provider not configured", workflows.PaymentAction{Provider: "other", ID: "pay-1", Sealed: sealed}, worker, noGet, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{deps: Deps{Payments: map[string]payment.Provider{"fake": gettable{sealer: tc.sealer, get: tc.get}}}}
			got, err := s.buyerAction(context.Background(), 7, &tc.action)
			if tc.want != "" {
				if err != nil || *got != (wire.PaymentAction{Provider: tc.action.Provider, ID: "pay-1", RedirectURL: tc.want}) {
					t.Fatalf("answered %+v, %v; want the page %s", got, err, tc.want)
				}
				return
			}
			var se huma.StatusError
			if !errors.As(err, &se) || se.GetStatus() != http.StatusServiceUnavailable {
				t.Fatalf("answered %+v, %v; want 503", got, err)
			}
			var h huma.HeadersError
			if !errors.As(err, &h) || h.GetHeaders().Get("Retry-After") == "" {
				t.Fatalf("503 without Retry-After: %v", err)
			}
		})
	}
}
