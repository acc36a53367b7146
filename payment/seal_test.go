package payment_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/seckill/seckill/payment"
)

func newSealer(t *testing.T, provider, key string) *payment.Sealer {
	t.Helper()
	s, err := payment.NewSealer(provider, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A sealed client action opens, whole, for its order and payment under
// the same provider key, and for nothing else: another order, another
// payment, another key (a rotated one), another provider, an altered or
// truncated blob, or a format this version does not know.
func TestSealedClientActionOpensOnlyWhereSealed(t *testing.T) {
	const page = "https://shop.example/pay/checkout/pay_0123456789abcdef"
	s := newSealer(t, "builtin", "sk-one")
	blob, err := s.Seal(42, "pay_1", payment.ClientAction{RedirectURL: page})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(blob, "v1.") || strings.Contains(blob, "checkout") || strings.Contains(blob, "pay_0123") {
		t.Fatalf("blob %q: want v1. and nothing of the page readable", blob)
	}
	a, err := newSealer(t, "builtin", "sk-one").Open(42, "pay_1", blob)
	if err != nil || a != (payment.ClientAction{RedirectURL: page}) {
		t.Fatalf("open = %+v, %v; want the page", a, err)
	}
	secret, err := s.Seal(42, "pi_1", payment.ClientAction{ClientSecret: "pi_1_secret_abc"})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := s.Open(42, "pi_1", secret); err != nil || a.ClientSecret != "pi_1_secret_abc" || a.RedirectURL != "" {
		t.Fatalf("open = %+v, %v; want the client secret", a, err)
	}
	if again, _ := s.Seal(42, "pay_1", payment.ClientAction{RedirectURL: page}); again == blob {
		t.Fatal("the same action sealed twice gives the same blob: the nonce is not random")
	}

	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(blob, "v1."))
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)/2] ^= 1
	for _, tc := range []struct {
		name      string
		sealer    *payment.Sealer
		order     int64
		paymentID string
		blob      string
	}{
		{"another order", s, 43, "pay_1", blob},
		{"another payment", s, 42, "pay_2", blob},
		{"another key", newSealer(t, "builtin", "sk-two"), 42, "pay_1", blob},
		{"another provider", newSealer(t, "stripe", "sk-one"), 42, "pay_1", blob},
		{"a flipped bit", s, 42, "pay_1", "v1." + base64.RawURLEncoding.EncodeToString(flipped)},
		{"truncated", s, 42, "pay_1", "v1." + base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1])},
		{"too short", s, 42, "pay_1", "v1.AAAA"},
		{"not base64", s, 42, "pay_1", "v1.!!!"},
		{"an unknown format", s, 42, "pay_1", "v2." + strings.TrimPrefix(blob, "v1.")},
		{"empty", s, 42, "pay_1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tc.sealer.Open(tc.order, tc.paymentID, tc.blob)
			if !errors.Is(err, payment.ErrUnsealable) || !a.Empty() {
				t.Fatalf("open = %+v, %v; want ErrUnsealable and nothing", a, err)
			}
		})
	}
}

// SealPayment answers the payment with its client action sealed in
// SealedAction and the plain fields gone; a payment with none stays
// without a seal.
func TestSealPaymentLeavesNothingPlain(t *testing.T) {
	s := newSealer(t, "stripe", "sk_test_x")
	p, err := s.SealPayment(7, payment.Payment{Provider: "stripe", ID: "pi_7", OrderID: 7, ClientSecret: "pi_7_secret_y"})
	if err != nil {
		t.Fatal(err)
	}
	if p.ClientSecret != "" || p.RedirectURL != "" || p.SealedAction == "" || p.ID != "pi_7" || p.OrderID != 7 {
		t.Fatalf("sealed payment = %+v", p)
	}
	if a, err := s.Open(7, "pi_7", p.SealedAction); err != nil || a.ClientSecret != "pi_7_secret_y" {
		t.Fatalf("open = %+v, %v", a, err)
	}
	if p, err := s.SealPayment(7, payment.Payment{ID: "pi_8"}); err != nil || p.SealedAction != "" {
		t.Fatalf("payment without a client action sealed to %+v, %v", p, err)
	}
	if _, err := payment.NewSealer("stripe", ""); err == nil {
		t.Fatal("a sealer without a secret key")
	}
}
