package stock_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/stock"
)

// An intent carries the sale's own payment timeout when it is positive and
// readable; anything else is read as none (the relay's default then
// applies) rather than dropping the order.
func TestParseIntentPaymentTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout any // the payment_timeout_ms field; nil: absent
		want    time.Duration
	}{
		{"absent", nil, 0},
		{"the sale's own", "90000", 90 * time.Second},
		{"zero", "0", 0},
		{"negative", "-5", 0},
		{"unreadable", "soon", 0},
		{"beyond a duration", "9223372036854775807", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := map[string]any{"order_id": "42", "sale_id": "7", "user_id": "alice",
				"amount_cents": "1999", "reserved_ms": "1700000000000"}
			if tc.timeout != nil {
				v["payment_timeout_ms"] = tc.timeout
			}
			in, err := stock.ParseIntent(v)
			if err != nil {
				t.Fatal(err)
			}
			if in.PaymentTimeout != tc.want {
				t.Errorf("payment timeout = %s, want %s", in.PaymentTimeout, tc.want)
			}
			if o := in.Order; o.OrderID != 42 || o.SaleID != 7 || o.UserID != "alice" || o.AmountCents != 1999 ||
				!in.ReservedAt.Equal(time.UnixMilli(1700000000000)) {
				t.Errorf("intent read as %+v", in)
			}
		})
	}
}

func TestParseIntentRejectsMissingFields(t *testing.T) {
	for _, missing := range []string{"order_id", "sale_id", "user_id", "amount_cents", "reserved_ms"} {
		v := map[string]any{"order_id": "42", "sale_id": "7", "user_id": "alice",
			"amount_cents": "1999", "reserved_ms": "1700000000000", "payment_timeout_ms": "1000"}
		delete(v, missing)
		if _, err := stock.ParseIntent(v); err == nil {
			t.Errorf("an intent without %s was accepted", missing)
		}
	}
}

// The purchase's trace context rides along when the api traced it; an
// intent without one is read as before.
func TestParseIntentTraceparent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	v := map[string]any{"order_id": "42", "sale_id": "7", "user_id": "alice",
		"amount_cents": "1999", "reserved_ms": "1700000000000", "traceparent": tp}
	if in, err := stock.ParseIntent(v); err != nil || in.Traceparent != tp {
		t.Errorf("traceparent read as %q (%v), want %q", in.Traceparent, err, tp)
	}
	delete(v, "traceparent")
	if in, err := stock.ParseIntent(v); err != nil || in.Traceparent != "" {
		t.Errorf("absent traceparent read as %q (%v)", in.Traceparent, err)
	}
}

// The admitting api's clock rides along as the order's admission time; an
// intent written before the api sent it is read without one.
func TestParseIntentAdmissionTime(t *testing.T) {
	v := map[string]any{"order_id": "42", "sale_id": "7", "user_id": "alice",
		"amount_cents": "1999", "reserved_ms": "1700000000000", "admitted_ms": "1699999999987"}
	if in, err := stock.ParseIntent(v); err != nil || !in.Order.AdmittedAt.Equal(time.UnixMilli(1699999999987)) {
		t.Errorf("admission time read as %s (%v)", in.Order.AdmittedAt, err)
	}
	delete(v, "admitted_ms")
	if in, err := stock.ParseIntent(v); err != nil || !in.Order.AdmittedAt.IsZero() {
		t.Errorf("absent admission time read as %s (%v)", in.Order.AdmittedAt, err)
	}
}
