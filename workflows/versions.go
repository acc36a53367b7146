package workflows

import "go.temporal.io/sdk/workflow"

// The eras of OrderWorkflow. Every workflow records, in its first workflow
// task, the version it started at (workflow.GetVersion under the change id
// VersionUpdates) and keeps that era's command sequence to its end, so a
// worker of any later build replays it (replay_test.go replays a recorded
// history of every era; README "Changing the workflow"). Each era's code
// lives where a reader looks for it:
//
//   - 0, before VersionUpdates: pay and cancel as signals, DeductStock and
//     CreateOrder as two steps, the memo upserted at each step, the ending
//     in steps (legacy.go).
//   - 1, VersionUpdates: pay and cancel as updates (decisions.go).
//   - 2, VersionLeanSaga: one PlaceOrder step (order.go, run).
//   - 3, VersionDeadline: the deadline rule in the validators (decisions.go).
//   - 4, VersionPaidWhilePlacing: a payment decided while placing survives
//     a cancellation (order.go, run).
//   - 5, VersionOneStepEnd: the ending in one EndOrder activity (order.go,
//     end); the ending in steps before it is in legacy.go.
//   - 6, VersionLocalPay: MarkPaid first as a local activity, in the
//     workflow task that took the payment (order.go, pay).
//   - 7, VersionPayments: an order started with a payment provider pays
//     at it (payments.go): pay starts a payment, the provider's capture
//     decides PAID, the deadline cancels the payment at the provider, and
//     a capture the order does not keep is refunded. Without a provider
//     it is version 6.
//   - 8, VersionLocalEnd: EndOrder first as a local activity, in the
//     workflow task that decided the ending (order.go, end).
//
// A new era adds its constant here, raises latestVersion, and gates its new
// commands on its flag in era.

// VersionUpdates is the change id (workflow.GetVersion) of the saga that
// takes pay and cancel as updates, registers RestoreStock before DeductStock,
// records a payment on a disconnected context and never compensates a
// paid order. Workflows started before it (DefaultVersion) replay their
// recorded command sequence: see docs/design.md §4.5 and README ("Changing
// the workflow").
const VersionUpdates = "pay-cancel-updates"

// VersionLeanSaga is version 2 of the same change id: the saga's first step
// is one local activity, PlaceOrder, which deducts the unit and writes the
// row in one database transaction and tells the buyer, and no step upserts
// the memo any more (the memo's summary is set once, at start; the status is
// the OrderStatus search attribute). An order then costs one marker and one
// visibility update fewer persistence work on its way to AWAITING_PAYMENT
// (docs/performance.md). It reuses VersionUpdates' change id rather than a
// new one because a new change id costs every new workflow one more marker
// and one more TemporalChangeVersion upsert, which is what it saves.
const VersionLeanSaga workflow.Version = 2

// VersionDeadline is version 3 of the same change id: pay and cancel
// decide nothing once the payment deadline has passed, even when they reach
// the workflow in the same workflow task as the timer's firing, whose
// callback would otherwise run after the update's and lose to it (they
// answer with the order's ending instead); and they are
// accepted while the order is being placed, to take effect once it awaits
// payment (a Reset re-delivers a run's accepted updates to a new run that
// starts by placing the order). Only the validators differ (they write no
// history), so the command sequence is version 2's; the version is
// recorded so that workflows started before it keep their behaviour.
const VersionDeadline workflow.Version = 3

// VersionPaidWhilePlacing is version 4: a payment decided while the order
// is being placed (a Reset re-delivers an accepted pay to a run that
// places the order again) survives the workflow's cancellation: the order
// is placed and paid on a disconnected context, where before the
// cancellation ended it CANCELLED and its buyer, told the pay was taken,
// lost it. It adds commands only on that path.
const VersionPaidWhilePlacing workflow.Version = 4

// VersionOneStepEnd is version 5: an order that ends without a sale
// (expired, cancelled, failed) ends in one activity, EndOrder, where it
// took three (FinishOrder, RestoreStock, ReleaseReservation), each with
// its task dispatch and workflow task: the row's end and the unit's return
// are one database transaction, and the Redis release follows in the same
// activity. It stays an ordinary activity retried until it succeeds, as
// the compensations were (docs/design.md §4.4), so a long database outage
// and the Web UI's Reset meet the same retries as before. It changes the
// command sequence of every ending.
const VersionOneStepEnd workflow.Version = 5

// VersionLocalPay is version 6: a decided payment is recorded first by a
// local activity, MarkPaid, in the workflow task that took the decision
// (the pay update's, or the timer's or a cancel's that lost to it), so
// that a paid order's update, its row and its close are one workflow task
// where they were two with an activity task between them. One attempt
// only: if it fails, the ordinary MarkPaid activity of earlier versions
// records it, retried on the server's schedule until it succeeds
// (docs/design.md §4.4), so a database outage and the Web UI's actions
// meet the same pending activity as before. It changes the command
// sequence of every paid order.
const VersionLocalPay workflow.Version = 6

// VersionPayments is version 7: an order started with a payment provider
// (OrderInput.Provider) is paid at that provider. The pay update starts a
// payment there (StartPayment) and answers what the buyer's client needs to
// complete it; the order becomes PAID only when the provider says the
// payment was captured for the order's amount and currency (the payment
// signal, or the answer of a cancel); at the deadline the workflow cancels
// the payment at the provider and a capture in that answer wins, an
// unreachable provider holding the unit for OrderInput.PaymentGrace; and a
// capture the order does not keep (after its ending, a second one, a wrong
// amount) is refunded (RefundPayment). An order started without a provider
// runs version 6's commands.
const VersionPayments workflow.Version = 7

// VersionLocalEnd is version 8: an order that ends without a sale
// (expired, cancelled, failed) is ended first by a local activity,
// EndOrder, in the workflow task that decided the ending (the cancel
// update's, the timer's, or the failed step's), so that its update, its
// row, the unit's return and its close are one workflow task where they
// were two with an activity task between them. One attempt only: if it
// fails, the ordinary EndOrder activity of version 5 ends the order,
// retried until it succeeds (docs/design.md §4.4), so a long database
// outage and the Web UI's actions meet the same pending activity as
// before. It is version 6's pay applied to the ending, and changes the
// command sequence of every ending.
const VersionLocalEnd workflow.Version = 8

// latestVersion is the version new workflows start at.
const latestVersion = VersionLocalEnd

// era is what the version a workflow started at decides.
type era struct {
	// v1 is false for workflows started before VersionUpdates; lean is
	// true for those started at VersionLeanSaga or later, strictDeadline
	// for those started at VersionDeadline or later.
	v1, lean, strictDeadline bool
	// paidWhilePlacing: started at VersionPaidWhilePlacing or later;
	// oneStepEnd: at VersionOneStepEnd or later; localPay: at
	// VersionLocalPay or later.
	paidWhilePlacing, oneStepEnd, localPay bool
	// payments: started at VersionPayments or later (an order with a
	// provider then pays at it); localEnd: at VersionLocalEnd or later.
	payments, localEnd bool
}

func eraOf(v workflow.Version) era {
	return era{v1: v >= 1, lean: v >= VersionLeanSaga, strictDeadline: v >= VersionDeadline,
		paidWhilePlacing: v >= VersionPaidWhilePlacing, oneStepEnd: v >= VersionOneStepEnd, localPay: v >= VersionLocalPay,
		payments: v >= VersionPayments, localEnd: v >= VersionLocalEnd}
}
