package stock

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/seckill/seckill/domain"
)

// The fields of an intent stream entry, as reserve.lua writes them. The
// script spells them out in Lua; these are the names Go reads them by.
const (
	IntentOrderID          = "order_id"
	IntentSaleID           = "sale_id"
	IntentUserID           = "user_id"
	IntentAmountCents      = "amount_cents"
	IntentReservedMS       = "reserved_ms"        // when Redis admitted the order, Unix ms
	IntentAdmittedMS       = "admitted_ms"        // the admitting api's clock at admission, Unix ms, when it sent one
	IntentPaymentTimeoutMS = "payment_timeout_ms" // the sale's own, when it has one
	IntentTraceparent      = "traceparent"        // the purchase's, when traced
	IntentIdempotencyKey   = "idem_key"           // the winning request's, when it had one
)

// Intent is an entry of a sale's intent stream: an admitted order waiting
// for its workflow.
type Intent struct {
	Order domain.OrderRef
	// ReservedAt is when Redis admitted the order.
	ReservedAt time.Time
	// PaymentTimeout is the sale's own payment timeout; 0 when the entry
	// carries none, or none that is positive and readable.
	PaymentTimeout time.Duration
	// Traceparent is the purchase's W3C trace context, "" when the api does
	// not trace.
	Traceparent string
}

// ParseIntent reads an entry written by reserve.lua. An unreadable
// payment_timeout_ms is read as none rather than failing the entry: a
// dropped intent would leave its buyer's unit held with no workflow to
// release it.
func ParseIntent(v map[string]any) (Intent, error) {
	num := func(k string) (int64, error) {
		s, _ := v[k].(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("field %s: %w", k, err)
		}
		return n, nil
	}
	var in Intent
	var err error
	if in.Order.OrderID, err = num(IntentOrderID); err != nil {
		return in, err
	}
	if in.Order.SaleID, err = num(IntentSaleID); err != nil {
		return in, err
	}
	if in.Order.AmountCents, err = num(IntentAmountCents); err != nil {
		return in, err
	}
	ms, err := num(IntentReservedMS)
	if err != nil {
		return in, err
	}
	in.ReservedAt = time.UnixMilli(ms).UTC()
	in.Order.UserID, _ = v[IntentUserID].(string)
	if in.Order.UserID == "" {
		return in, errors.New("field " + IntentUserID + ": empty")
	}
	if ms, err := num(IntentPaymentTimeoutMS); err == nil && ms > 0 && ms <= math.MaxInt64/int64(time.Millisecond) {
		in.PaymentTimeout = time.Duration(ms) * time.Millisecond
	}
	// Intents written before the api sent its clock carry none: the
	// order's row then takes the id's time (store.PlaceOrder).
	if ms, err := num(IntentAdmittedMS); err == nil && ms > 0 {
		in.Order.AdmittedAt = time.UnixMilli(ms).UTC()
	}
	in.Traceparent, _ = v[IntentTraceparent].(string)
	in.Order.IdempotencyKey, _ = v[IntentIdempotencyKey].(string)
	return in, nil
}
