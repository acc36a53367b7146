package relay

import (
	"testing"
	"time"
)

// The sale's own payment timeout, when its intent carries a positive one,
// wins over the relay's default; anything else falls back to the default
// rather than dropping the order.
func TestParseIntentPaymentTimeout(t *testing.T) {
	const def = 15 * time.Minute
	for _, tc := range []struct {
		name    string
		timeout any // the payment_timeout_ms field; nil: absent
		want    time.Duration
	}{
		{"absent", nil, def},
		{"the sale's own", "90000", 90 * time.Second},
		{"zero", "0", def},
		{"negative", "-5", def},
		{"unreadable", "soon", def},
		{"beyond a duration", "9223372036854775807", def},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := map[string]any{"order_id": "42", "sale_id": "7", "user_id": "alice",
				"amount_cents": "1999", "reserved_ms": "1700000000000"}
			if tc.timeout != nil {
				v["payment_timeout_ms"] = tc.timeout
			}
			in, err := parseIntent(v, def)
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
		if _, err := parseIntent(v, time.Minute); err == nil {
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
	if in, err := parseIntent(v, time.Minute); err != nil || in.traceparent != tp {
		t.Errorf("traceparent read as %q (%v), want %q", in.traceparent, err, tp)
	}
	delete(v, "traceparent")
	if in, err := parseIntent(v, time.Minute); err != nil || in.traceparent != "" {
		t.Errorf("absent traceparent read as %q (%v)", in.traceparent, err)
	}
}
