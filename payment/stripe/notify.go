package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v83"
	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/seckill/seckill/payment"
)

// SignatureHeader is the header Stripe signs its webhooks in.
const SignatureHeader = "Stripe-Signature"

const defaultTolerance = webhook.DefaultTolerance

// ErrAPIVersion: a verified event from a webhook endpoint of another API
// release train than the library's (APIVersion's part after the dot:
// "2025-09-30.clover" is train clover). Within a train Stripe only adds
// fields; across trains an object can change shape, and the library refuses
// to trust its own decoding. So does the adapter (payment.ErrNotReadable):
// the notification endpoint answers it 503, Stripe retries for up to three
// days, and the operator recreates the webhook endpoint with api_version
// set to APIVersion meanwhile. Accepting it could misread a payment; ignoring it
// would lose it.
var ErrAPIVersion = errors.New("stripe event of another API release train")

// Verify checks a webhook's Stripe-Signature, then its age against now,
// then parses the event:
//
//	payment_intent.succeeded        the intent, Captured
//	payment_intent.payment_failed   the intent, Declined (it carries last_payment_error)
//	payment_intent.canceled         the intent, Canceled
//	refund.created, refund.updated,
//	refund.failed                   the refund, and its intent: Refunded once the refund succeeded,
//	                                Captured before (the money is still taken) or after it failed
//	anything else                   payment.ErrIgnored
//
// charge.refunded is ignored: it reports the same refund as refund.* as a
// charge, without the refund's own status.
//
// The library's ConstructEvent checks the age before the signature, and
// against the wall clock; the port wants the signature first (a forged
// notification is a forgery, whatever its timestamp) and the caller's now.
// So the signature is checked alone (webhook.ValidatePayloadIgnoringTolerance),
// then the signed timestamp against now: it is part of what is signed, so
// it can be trusted once the signature holds.
func (p *Provider) Verify(header http.Header, body []byte, now time.Time) (payment.Event, error) {
	sig := header.Get(SignatureHeader)
	if err := webhook.ValidatePayloadIgnoringTolerance(body, sig, p.webhookSecret); err != nil {
		return payment.Event{}, fmt.Errorf("stripe: %w: %w", payment.ErrBadSignature, err)
	}
	signed, ok := signedAt(sig)
	if !ok {
		return payment.Event{}, fmt.Errorf("stripe: %w: no timestamp in %s", payment.ErrBadSignature, SignatureHeader)
	}
	if age := now.Sub(signed); age > p.tolerance {
		return payment.Event{}, fmt.Errorf("stripe: %w: signed %s ago, tolerance %s: %w",
			payment.ErrStale, age.Round(time.Second), p.tolerance, webhook.ErrTooOld)
	}
	// The API version is checked below, to tell it apart; the tolerance
	// above, against now.
	ev, err := webhook.ConstructEventWithOptions(body, sig, p.webhookSecret, webhook.ConstructEventOptions{
		IgnoreTolerance:          true,
		IgnoreAPIVersionMismatch: true,
	})
	if err != nil {
		return payment.Event{}, fmt.Errorf("stripe: notification: %w: %w", payment.ErrRejected, err)
	}
	if !sameTrain(ev.APIVersion, stripego.APIVersion) {
		return payment.Event{}, fmt.Errorf("stripe: event %s: %w (%w): %s, the adapter speaks %s",
			ev.ID, ErrAPIVersion, payment.ErrNotReadable, ev.APIVersion, stripego.APIVersion)
	}
	out := payment.Event{ID: ev.ID, At: time.Unix(ev.Created, 0).UTC()}
	if ev.Data == nil {
		return payment.Event{}, fmt.Errorf("stripe: event %s: %w: no data", ev.ID, payment.ErrRejected)
	}
	switch ev.Type {
	case stripego.EventTypePaymentIntentSucceeded,
		stripego.EventTypePaymentIntentPaymentFailed,
		stripego.EventTypePaymentIntentCanceled:
		var pi stripego.PaymentIntent
		if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
			return payment.Event{}, fmt.Errorf("stripe: event %s: %w: %w", ev.ID, payment.ErrRejected, err)
		}
		out.Payment = toPayment(&pi)
		if ev.Type == stripego.EventTypePaymentIntentPaymentFailed && out.Payment.State == payment.Pending {
			// The event is the failure, whatever the snapshot's fields say.
			out.Payment.State = payment.Declined
		}
	case stripego.EventTypeRefundCreated, stripego.EventTypeRefundUpdated, stripego.EventTypeRefundFailed:
		var r stripego.Refund
		if err := json.Unmarshal(ev.Data.Raw, &r); err != nil {
			return payment.Event{}, fmt.Errorf("stripe: event %s: %w: %w", ev.ID, payment.ErrRejected, err)
		}
		refund := toRefund(&r)
		out.Refund = &refund
		// A refund is whole: its amount is what was captured. The refund
		// names its intent only; the order is found by the payment id.
		out.Payment = payment.Payment{
			Provider: Name,
			ID:       refund.PaymentID,
			Amount:   refund.Amount,
			Captured: refund.Amount,
			State:    payment.Captured,
		}
		if refund.State == payment.RefundSucceeded {
			out.Payment.State = payment.Refunded
		}
	default:
		return payment.Event{}, fmt.Errorf("stripe: event %s of type %s: %w", ev.ID, ev.Type, payment.ErrIgnored)
	}
	return out, nil
}

// signedAt is the header's timestamp, read as the library reads it (the
// last t= wins), so it is the one the signature covered.
func signedAt(sig string) (time.Time, bool) {
	var at time.Time
	ok := false
	for _, part := range strings.Split(sig, ",") {
		k, v, found := strings.Cut(part, "=")
		if !found || k != "t" {
			continue
		}
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		at, ok = time.Unix(s, 0), true
	}
	return at, ok
}

// sameTrain reports whether two API versions ("2025-09-30.clover") are of
// one release train, as the library's own check in ConstructEvent does.
func sameTrain(a, b string) bool {
	_, ta, okA := strings.Cut(a, ".")
	_, tb, okB := strings.Cut(b, ".")
	return okA && okB && ta == tb
}
