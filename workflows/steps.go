package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
)

// Activity options. The forward steps and Notify are short database and
// Redis calls, so they run as local activities: inside the workflow task,
// without a round trip through the Temporal server each, which is where a
// saga's time goes. They retry infrastructure errors with backoff for a
// bounded time, then the saga compensates. Compensations are ordinary
// activities that retry until they succeed, because a unit that is never
// given back is lost.
var (
	forwardOptions = workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrTypeOutOfStock, activities.ErrTypeInvalidOrder, activities.ErrTypeSaleCancelled},
		},
	}
	compensationOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    500 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    0, // until it succeeds
		},
	}
	// A decided payment's first try (VersionLocalPay), and a decided
	// ending's (VersionLocalEnd): once, inside the workflow task; a
	// failure falls back to the ordinary activity.
	tryOnceOptions = workflow.LocalActivityOptions{
		StartToCloseTimeout: 5 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	}
	// The calls to a payment provider (payments.go). Starting a payment
	// and a buyer's cancel are answered to a waiting caller, so they are
	// retried about half a minute in all, a provider's Retry-After
	// respected; a refusal is not retried.
	//
	// Every provider call runs on PaymentTaskQueue, whose workers share
	// one rate limit the server enforces (worker.Options.PaymentRate). A
	// call waiting for its turn longer than ScheduleToStartTimeout finds
	// the provider's budget spent: the buyer is told to try again rather
	// than held.
	providerCallOptions = workflow.ActivityOptions{
		TaskQueue:              PaymentTaskQueue,
		ScheduleToStartTimeout: 10 * time.Second,
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        500 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        5 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrTypePaymentRejected},
		},
	}
	// The cancel at the deadline is retried until it is answered; the
	// grace timer, not these retries, bounds how long the unit is held.
	deadlineCancelOptions = workflow.ActivityOptions{
		TaskQueue:           PaymentTaskQueue,
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        500 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrTypePaymentRejected},
		},
	}
	// A refund is a compensation: retried until the provider takes it.
	refundOptions = workflow.ActivityOptions{
		TaskQueue:           PaymentTaskQueue,
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        500 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypePaymentRejected},
		},
	}
	// A lost push is not a lost result: the buyer's socket gets a snapshot
	// of their orders on connect. So Notify gives up after a few tries.
	notifyOptions = workflow.LocalActivityOptions{
		StartToCloseTimeout: 5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    200 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumAttempts:    5,
		},
	}
)

// Local activities are called by name, so the worker runs the registered
// *activities.Activities, which holds the database and Redis clients.
const (
	deductStock = "DeductStock"
	createOrder = "CreateOrder"
	placeOrder  = "PlaceOrder"
	markPaid    = "MarkPaid"
	endOrder    = "EndOrder"
	// markPaidWith is MarkPaid with the provider's payment
	// (VersionPayments).
	markPaidWith = "MarkPaidWith"
	notify       = "Notify"
)

// a is only used to name activity methods; the worker registers the real one.
var a *activities.Activities

// isSaleCancelled reports whether a forward step was refused because an
// operator cancelled the order's sale.
func isSaleCancelled(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrTypeSaleCancelled
}

// rootMessage is the message of the innermost error, which is the one that
// says what went wrong (not "activity error").
func rootMessage(err error) string {
	for {
		next := unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

func unwrap(err error) error {
	u, ok := err.(interface{ Unwrap() error })
	if !ok {
		return nil
	}
	return u.Unwrap()
}
