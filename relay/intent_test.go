package relay

import (
	"testing"
	"time"

	"github.com/seckill/seckill/stock"
)

// The sale's own payment timeout, when its intent carries a positive one,
// wins over the relay's default; anything else falls back to the default
// rather than dropping the order. (stock's tests cover reading the entry.)
func TestIntentPaymentTimeout(t *testing.T) {
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
				"amount_cents": "1999", "reserved_ms": "1700000000000",
				"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
			if tc.timeout != nil {
				v["payment_timeout_ms"] = tc.timeout
			}
			si, err := stock.ParseIntent(v)
			if err != nil {
				t.Fatal(err)
			}
			in := orderIntent(si, &Options{PaymentTimeout: def, PaymentProvider: "builtin", PaymentGrace: time.Minute})
			if in.PaymentTimeout != tc.want {
				t.Errorf("payment timeout = %s, want %s", in.PaymentTimeout, tc.want)
			}
			if o := in.Order; o.OrderID != 42 || o.SaleID != 7 || o.UserID != "alice" || o.AmountCents != 1999 ||
				!in.ReservedAt.Equal(time.UnixMilli(1700000000000)) || in.traceparent != v["traceparent"] ||
				in.Provider != "builtin" || in.PaymentGrace != time.Minute {
				t.Errorf("intent read as %+v", in)
			}
		})
	}
}
