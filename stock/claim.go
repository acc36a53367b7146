package stock

import (
	"context"
	"fmt"
	"time"
)

// paymentPassKey marks the deployment's reconciliation of its payment
// providers' records as done for the interval its expiry runs
// (ClaimPaymentPass).
const paymentPassKey = "seckill:payments:reconciled"

// ClaimPaymentPass claims the deployment's next reconciliation of the
// payment providers' records, due every `every`: true for the one
// reconciler whose SET NX made the key, false for the others until the key
// expires, so the providers are asked once an interval however many
// workers run a reconciler. A claimer that stops mid-pass leaves the next
// pass to whoever claims after the expiry.
func (s *Stock) ClaimPaymentPass(ctx context.Context, every time.Duration) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, paymentPassKey, time.Now().UTC().Format(time.RFC3339), every).Result()
	if err != nil {
		return false, fmt.Errorf("claim the payment reconciliation: %w", err)
	}
	return ok, nil
}
