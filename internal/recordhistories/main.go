// Command recordhistories records event histories of OrderWorkflow (and of
// PaymentSettleWorkflow) against a real Temporal server, for the replay test
// in workflows/replay_test.go. Run it before changing the workflow's command
// sequence, so the histories of the version in production are kept (README,
// "Changing the workflow").
//
// It starts a Temporal dev server from the prebuilt seckill binary (or uses
// -address), runs a worker on the order task queue with the module's
// workflows and fake activities (and one on the payment task queue with the
// fake provider calls), runs one workflow per scenario to completion and
// writes each history as JSON that
// worker.WorkflowReplayer.ReplayWorkflowHistoryFromJSONFile reads. A
// scenario that exists for a workflow.GetVersion change id fails unless its
// history records that change's marker (scenario.markers), so a recorded
// file is what its name says.
//
//	go build -o /tmp/seckill ./cmd/seckill
//	SECKILL_BIN=/tmp/seckill go run ./internal/recordhistories -out workflows/testdata/histories -prefix v1
//
// -only records some scenarios (a new one, without re-recording the rest):
//
//	SECKILL_BIN=/tmp/seckill go run ./internal/recordhistories -prefix v7 -only free-paid,settle-unknown-order
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/worker"
	"github.com/seckill/seckill/workflows"
)

// fakes stands in for *activities.Activities: same method names and
// signatures, no database, Redis or push. DeductStock and PlaceOrder fail for the order ids
// in outOfStock the way the real one fails when the sale is sold out.
type fakes struct {
	mu         sync.Mutex
	outOfStock map[int64]bool
	calls      map[int64][]string
	// holdPaid maps an order id to the run of its workflow whose
	// MarkPaidWith fails, as with the database refusing PAID for now.
	holdPaid map[int64]string
	// payments maps a payment's key (order, attempt, deadline, as the
	// real provider's idempotency key names it) to its id; started counts
	// the payments started under each attempt's first id, pay-<order>-<n>.
	payments map[string]string
	started  map[string]int
}

func newFakes() *fakes {
	return &fakes{outOfStock: map[int64]bool{}, calls: map[int64][]string{}, holdPaid: map[int64]string{},
		payments: map[string]string{}, started: map[string]int{}}
}

func (f *fakes) record(id int64, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[id] = append(f.calls[id], name)
}

func (f *fakes) DeductStock(_ context.Context, ref domain.OrderRef) error {
	return f.takeUnit(ref, "DeductStock")
}

func (f *fakes) PlaceOrder(_ context.Context, ref domain.OrderRef) error {
	return f.takeUnit(ref, "PlaceOrder")
}

// takeUnit is the step that takes the order's unit (named step): it fails
// as the real one does on a sold-out database for the orders in outOfStock.
func (f *fakes) takeUnit(ref domain.OrderRef, step string) error {
	f.record(ref.OrderID, step)
	f.mu.Lock()
	oos := f.outOfStock[ref.OrderID]
	f.mu.Unlock()
	if oos {
		return temporal.NewNonRetryableApplicationError("out of stock in database", activities.ErrTypeOutOfStock, nil)
	}
	return nil
}

func (f *fakes) CreateOrder(_ context.Context, ref domain.OrderRef) error {
	f.record(ref.OrderID, "CreateOrder")
	return nil
}

func (f *fakes) Notify(_ context.Context, in activities.NotifyInput) error {
	f.record(in.Ref.OrderID, "Notify("+string(in.Status)+")")
	return nil
}

func (f *fakes) MarkPaid(_ context.Context, ref domain.OrderRef) (time.Time, error) {
	f.record(ref.OrderID, "MarkPaid")
	return time.Now().UTC().Truncate(time.Microsecond), nil
}

func (f *fakes) FinishOrder(_ context.Context, in activities.FinishInput) (domain.Status, error) {
	f.record(in.Ref.OrderID, "FinishOrder("+string(in.Status)+")")
	return in.Status, nil
}

func (f *fakes) EndOrder(_ context.Context, in activities.FinishInput) (domain.Status, error) {
	f.record(in.Ref.OrderID, "EndOrder("+string(in.Status)+")")
	return in.Status, nil
}

func (f *fakes) RestoreStock(_ context.Context, ref domain.OrderRef) error {
	f.record(ref.OrderID, "RestoreStock")
	return nil
}

func (f *fakes) ReleaseReservation(_ context.Context, ref domain.OrderRef) error {
	f.record(ref.OrderID, "ReleaseReservation")
	return nil
}

// The payment activities (workflows.VersionPayments): a provider whose
// payments stay pending until the scenario signals their capture, and
// whose cancel answers cancelled.

// StartPayment answers attempt n's payment pay-<order>-<n>; another
// deadline is another payment (a Reset run's own window), pay-<order>-<n>-2.
func (f *fakes) StartPayment(_ context.Context, in activities.StartPaymentInput) (payment.Payment, error) {
	f.record(in.Ref.OrderID, fmt.Sprintf("StartPayment(%d)", in.Attempt))
	key := fmt.Sprintf("%d/%d/%d", in.Ref.OrderID, in.Attempt, in.ExpiresAt.UnixNano())
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.payments[key]
	if !ok {
		id = payID(in.Ref, in.Attempt)
		if f.started[id]++; f.started[id] > 1 {
			id = fmt.Sprintf("%s-%d", id, f.started[id])
		}
		f.payments[key] = id
	}
	return fakePayment(in.Ref, id, payment.Pending), nil
}

func (f *fakes) CancelPayment(_ context.Context, in activities.PaymentRefIn) (payment.Payment, error) {
	var order int64
	var n int
	_, _ = fmt.Sscanf(in.PaymentID, "pay-%d-%d", &order, &n) // fakePayment's ids
	f.record(order, "CancelPayment("+in.PaymentID+")")
	return payment.Payment{Provider: in.Provider, ID: in.PaymentID, State: payment.Canceled}, nil
}

func (f *fakes) RefundPayment(_ context.Context, in activities.RefundInput) (payment.Refund, error) {
	f.record(in.Ref.OrderID, "RefundPayment("+in.PaymentID+")")
	return payment.Refund{Provider: in.Provider, ID: "re-" + in.PaymentID, PaymentID: in.PaymentID, State: payment.RefundSucceeded}, nil
}

func (f *fakes) MarkPaidWith(ctx context.Context, in activities.PaidInput) (time.Time, error) {
	f.mu.Lock()
	held := f.holdPaid[in.Ref.OrderID] == activity.GetInfo(ctx).WorkflowExecution.RunID
	f.mu.Unlock()
	if held {
		f.record(in.Ref.OrderID, "MarkPaidWith("+in.PaymentID+") refused")
		return time.Time{}, errors.New("database refuses PAID for now")
	}
	f.record(in.Ref.OrderID, "MarkPaidWith("+in.PaymentID+")")
	return time.Now().UTC().Truncate(time.Microsecond), nil
}

// ReadOrderPayment is PaymentSettleWorkflow's read of the order's row. The
// fakes keep no rows: every order is one the database does not know, which
// the real one refuses as ErrTypeInvalidOrder (no retry creates it).
func (f *fakes) ReadOrderPayment(_ context.Context, orderID int64) (activities.OrderPayment, error) {
	f.record(orderID, "ReadOrderPayment")
	return activities.OrderPayment{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("order %d: not found", orderID), activities.ErrTypeInvalidOrder, nil)
}

// payID is the id of the first payment of ref's attempt n at the fake
// provider.
func payID(ref domain.OrderRef, n int) string {
	return fmt.Sprintf("pay-%d-%d", ref.OrderID, n)
}

// fakePayment is ref's payment id at the fake provider.
func fakePayment(ref domain.OrderRef, id string, state payment.State) payment.Payment {
	return payment.Payment{Provider: fakeProvider, ID: id, OrderID: ref.OrderID,
		Amount: payment.Money{Minor: ref.AmountCents, Currency: "USD"}, State: state, RedirectURL: "https://pay.example/" + id}
}

// fakeProvider is the provider the payment scenarios start orders with.
const fakeProvider = "builtin"

// captured signals that ref's payment attempt n was captured for amount.
func captured(ctx context.Context, c client.Client, id string, ref domain.OrderRef, n int, amount int64) error {
	return c.SignalWorkflow(ctx, id, "", workflows.SignalPayment, captureEvent(ref, n, amount))
}

// captureEvent is the provider's event of the capture of ref's payment
// attempt n for amount.
func captureEvent(ref domain.OrderRef, n int, amount int64) workflows.PaymentEvent {
	p := fakePayment(ref, payID(ref, n), payment.Captured)
	p.Captured = payment.Money{Minor: amount, Currency: "USD"}
	return workflows.PaymentEvent{EventID: fmt.Sprintf("ev-%s-%d", p.ID, amount), Provider: fakeProvider, Payment: p, At: time.Now().UTC()}
}

// scenario is one recorded history.
type scenario struct {
	name       string // file is <prefix>-<name>.json
	timeout    time.Duration
	outOfStock bool
	// provider, if set, is the order's payment provider (from
	// workflows.VersionPayments on).
	provider string
	// free: the order's sale is priced 0 (AmountCents 0).
	free bool
	// act runs once the workflow awaits payment (its timer has started);
	// nil waits for the workflow to end on its own.
	act  func(ctx context.Context, c client.Client, id string, ref domain.OrderRef) error
	want domain.Status
	// drive, if set, replaces starting the order's workflow and acting on
	// it: it drives a workflow of its own making through the scenario and
	// returns the run whose history is recorded, once it has ended as the
	// scenario wants, and a description of its result.
	drive func(ctx context.Context, c client.Client, f *fakes, sc scenario, ref domain.OrderRef) (client.WorkflowRun, string, error)
	// markers are the change ids (workflow.GetVersion) whose version
	// marker the history must record: the scenario's reason to exist.
	markers []string
}

var scenarios = []scenario{
	{name: "paid", timeout: 15 * time.Minute, want: domain.StatusPaid,
		act: func(ctx context.Context, c client.Client, id string, _ domain.OrderRef) error {
			return update(ctx, c, id, workflows.UpdatePay)
		}},
	{name: "cancelled", timeout: 15 * time.Minute, want: domain.StatusCancelled,
		act: func(ctx context.Context, c client.Client, id string, _ domain.OrderRef) error {
			return update(ctx, c, id, workflows.UpdateCancel, workflows.CancelRequest{Reason: "cancelled by buyer"})
		}},
	{name: "expired", timeout: 2 * time.Second, want: domain.StatusExpired},
	{name: "failed", timeout: 15 * time.Minute, outOfStock: true, want: domain.StatusFailed},
	{name: "operator-cancelled", timeout: 15 * time.Minute, want: domain.StatusCancelled,
		act: func(ctx context.Context, c client.Client, id string, _ domain.OrderRef) error {
			return c.CancelWorkflow(ctx, id, "")
		}},
	// Paid at a provider (workflows.VersionPayments): pay starts a payment,
	// its capture's signal decides.
	{name: "provider-paid", timeout: 15 * time.Minute, provider: fakeProvider, want: domain.StatusPaid,
		act: func(ctx context.Context, c client.Client, id string, ref domain.OrderRef) error {
			if err := update(ctx, c, id, workflows.UpdatePay, workflows.PayRequest{ReturnURL: "https://shop.example/return"}); err != nil {
				return err
			}
			return captured(ctx, c, id, ref, 1, ref.AmountCents)
		}},
	// The deadline with a payment pending: cancelled at the provider,
	// which answers cancelled.
	{name: "provider-expired", timeout: 3 * time.Second, provider: fakeProvider, want: domain.StatusExpired,
		act: func(ctx context.Context, c client.Client, id string, _ domain.OrderRef) error {
			return update(ctx, c, id, workflows.UpdatePay)
		}},
	// A capture of a wrong amount, refunded; then the buyer's cancel, the
	// next attempt cancelled at the provider first.
	{name: "provider-refunded", timeout: 15 * time.Minute, provider: fakeProvider, want: domain.StatusCancelled,
		act: func(ctx context.Context, c client.Client, id string, ref domain.OrderRef) error {
			if err := update(ctx, c, id, workflows.UpdatePay); err != nil {
				return err
			}
			if err := captured(ctx, c, id, ref, 1, ref.AmountCents-1); err != nil {
				return err
			}
			if err := waitForEvent(ctx, c, id, "", enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, "RefundPayment"); err != nil {
				return err
			}
			if err := updateID(ctx, c, id, "pay-2", workflows.UpdatePay); err != nil {
				return err
			}
			return update(ctx, c, id, workflows.UpdateCancel, workflows.CancelRequest{Reason: "cancelled by buyer"})
		}},
	// An order of a sale priced 0, with a provider: pay decides PAID at
	// once, no payment started (change free-order-without-provider).
	{name: "free-paid", timeout: 15 * time.Minute, provider: fakeProvider, free: true, want: domain.StatusPaid,
		markers: []string{"free-order-without-provider"},
		act: func(ctx context.Context, c client.Client, id string, _ domain.OrderRef) error {
			return update(ctx, c, id, workflows.UpdatePay, workflows.PayRequest{ReturnURL: "https://shop.example/return"})
		}},
	// The Web UI's Reset to the first task of an order whose capture
	// decided PAID but whose row refused it: the reset run hears the
	// capture while placing the order, acts on it once placed, before its
	// re-delivered pay has handed out a payment of its own, and is PAID by
	// the earlier run's payment (change capture-of-an-earlier-run).
	{name: "reset-earlier-capture", timeout: 15 * time.Minute, provider: fakeProvider, want: domain.StatusPaid,
		markers: []string{"capture-of-an-earlier-run"}, drive: resetEarlierCapture},
	// A capture naming an order the database does not know, settled by its
	// PaymentSettleWorkflow: refunded (change settle-unknown-order).
	{name: "settle-unknown-order", markers: []string{workflows.SettleUnknownOrder}, drive: settleUnknownOrder},
}

// resetEarlierCapture drives the reset-earlier-capture scenario: pay,
// the capture's signal deciding PAID while MarkPaidWith is refused, a
// Reset to the first workflow task, and the reset run to its end.
func resetEarlierCapture(ctx context.Context, c client.Client, f *fakes, sc scenario, ref domain.OrderRef) (client.WorkflowRun, string, error) {
	first, err := startOrder(ctx, c, sc, ref)
	if err != nil {
		return nil, "", err
	}
	id := first.GetID()
	f.mu.Lock()
	f.holdPaid[ref.OrderID] = first.GetRunID()
	f.mu.Unlock()
	if err := waitForEvent(ctx, c, id, first.GetRunID(), enumspb.EVENT_TYPE_TIMER_STARTED, ""); err != nil {
		return nil, "", err
	}
	if err := update(ctx, c, id, workflows.UpdatePay, workflows.PayRequest{ReturnURL: "https://shop.example/return"}); err != nil {
		return nil, "", fmt.Errorf("pay: %w", err)
	}
	if err := captured(ctx, c, id, ref, 1, ref.AmountCents); err != nil {
		return nil, "", err
	}
	// The local MarkPaidWith was refused: the ordinary activity retries.
	if err := waitForEvent(ctx, c, id, first.GetRunID(), enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, "MarkPaidWith"); err != nil {
		return nil, "", err
	}
	runID, err := resetToFirstTask(ctx, c, id, first.GetRunID())
	if err != nil {
		return nil, "", err
	}
	run := c.GetWorkflow(ctx, id, runID)
	desc, err := orderResult(ctx, run, sc.want)
	if err != nil {
		return nil, "", err
	}
	// Paid by the earlier run's payment, not by one of the reset run's.
	want := "MarkPaidWith(" + payID(ref, 1) + ")"
	f.mu.Lock()
	calls := f.calls[ref.OrderID]
	f.mu.Unlock()
	var paid string
	for _, call := range calls {
		if strings.HasPrefix(call, "MarkPaidWith(") && !strings.HasSuffix(call, "refused") {
			paid = call
		}
	}
	if paid != want {
		return nil, "", fmt.Errorf("the reset run recorded %q, want %s", paid, want)
	}
	return run, desc, nil
}

// resetToFirstTask resets the workflow's run to its first workflow task,
// as the Web UI's Reset does, and returns the new run's id.
func resetToFirstTask(ctx context.Context, c client.Client, id, runID string) (string, error) {
	events, err := history(ctx, c, id, runID)
	if err != nil {
		return "", err
	}
	var point int64
	for _, ev := range events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			point = ev.GetEventId()
			break
		}
	}
	resp, err := c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 "default",
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason:                    "reset as from the Web UI",
		WorkflowTaskFinishEventId: point,
		RequestId:                 "reset-" + runID,
	})
	if err != nil {
		return "", fmt.Errorf("reset %s to event %d: %w", id, point, err)
	}
	return resp.GetRunId(), nil
}

// settleUnknownOrder drives the settle-unknown-order scenario: the
// capture of a payment naming ref's order, which no workflow and no row
// knows, handed to its PaymentSettleWorkflow as the notification endpoint
// and the reconciliation do.
func settleUnknownOrder(ctx context.Context, c client.Client, _ *fakes, _ scenario, ref domain.OrderRef) (client.WorkflowRun, string, error) {
	ev := captureEvent(ref, 1, ref.AmountCents)
	if started, err := workflows.StartSettle(ctx, c, ev); err != nil || !started {
		return nil, "", fmt.Errorf("start settling (started %v): %w", started, err)
	}
	run := c.GetWorkflow(ctx, workflows.SettleWorkflowID(ev.Provider, ev.Payment.ID), "")
	var got workflows.Settlement
	if err := run.Get(ctx, &got); err != nil {
		return nil, "", fmt.Errorf("workflow result: %w", err)
	}
	if got != workflows.SettleRefunded {
		return nil, "", fmt.Errorf("settled %q, want %q", got, workflows.SettleRefunded)
	}
	return run, "settled " + string(got), nil
}

// update sends a pay or cancel update and waits for its outcome.
func update(ctx context.Context, c client.Client, id, name string, args ...any) error {
	return updateID(ctx, c, id, name, name, args...)
}

// updateID is update under another update id (a second pay).
func updateID(ctx context.Context, c client.Client, id, updateID, name string, args ...any) error {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateID: updateID, UpdateName: name, Args: args,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	var st workflows.OrderState
	return h.Get(ctx, &st)
}

func main() {
	var (
		out     = flag.String("out", "workflows/testdata/histories", "directory to write <prefix>-<scenario>.json into")
		prefix  = flag.String("prefix", "v0", "file name prefix, e.g. the workflow version")
		bin     = flag.String("bin", os.Getenv("SECKILL_BIN"), "seckill binary whose `temporal` command runs the server (default $SECKILL_BIN)")
		address = flag.String("address", "", "use this running Temporal server instead of starting one")
		idBase  = flag.Int64("id-base", 1000, "order ids are id-base+1, id-base+2, ... (distinct per run on a shared server)")
		only    = flag.String("only", "", "comma-separated scenario names to record (default all)")
	)
	flag.Parse()
	if err := run(*out, *prefix, *bin, *address, *idBase, *only); err != nil {
		fmt.Fprintln(os.Stderr, "recordhistories:", err)
		os.Exit(1)
	}
}

func run(out, prefix, bin, address string, idBase int64, only string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	if address == "" {
		if bin == "" {
			return errors.New("no -bin and no $SECKILL_BIN (source /tmp/svc/env)")
		}
		stop, addr, err := startTemporal(bin)
		if err != nil {
			return err
		}
		defer stop()
		address = addr
	}

	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.Dial(client.Options{HostPort: address, Logger: logger})
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	defer c.Close()
	if err := worker.RegisterSearchAttributes(ctx, c, "default"); err != nil {
		return err
	}

	f := newFakes()
	w := sdkworker.New(c, workflows.TaskQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(workflows.OrderWorkflow, workflow.RegisterOptions{Name: "OrderWorkflow"})
	w.RegisterWorkflowWithOptions(workflows.PaymentSettleWorkflow, workflow.RegisterOptions{Name: workflows.PaymentSettleWorkflowName})
	w.RegisterActivity(f) // registers each method under its name, like the real worker
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	// The provider calls run on their own queue (workflows.PaymentTaskQueue),
	// as the real worker's newPayments registers them.
	pw := sdkworker.New(c, workflows.PaymentTaskQueue, sdkworker.Options{DisableWorkflowWorker: true})
	for name, fn := range map[string]any{"StartPayment": f.StartPayment, "CancelPayment": f.CancelPayment, "RefundPayment": f.RefundPayment} {
		pw.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	if err := pw.Start(); err != nil {
		return err
	}
	defer pw.Stop()

	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	for i, sc := range scenarios {
		if len(want) > 0 && !want[sc.name] {
			continue
		}
		ref := domain.OrderRef{OrderID: idBase + int64(i) + 1, SaleID: 7, UserID: "u-" + sc.name, AmountCents: 1999}
		if sc.free {
			ref.AmountCents = 0
		}
		if sc.outOfStock {
			f.mu.Lock()
			f.outOfStock[ref.OrderID] = true
			f.mu.Unlock()
		}
		file := filepath.Join(out, prefix+"-"+sc.name+".json")
		last, err := record(ctx, c, f, sc, ref, file)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		f.mu.Lock()
		calls := f.calls[ref.OrderID]
		f.mu.Unlock()
		fmt.Printf("%s: order %d: %s; activities %v\n", file, ref.OrderID, last, calls)
	}
	return nil
}

// record runs one scenario and writes its history to file. It returns a
// description of the run, its result and its last event.
func record(ctx context.Context, c client.Client, f *fakes, sc scenario, ref domain.OrderRef, file string) (string, error) {
	drive := sc.drive
	if drive == nil {
		drive = driveOrder
	}
	run, result, err := drive(ctx, c, f, sc, ref)
	if err != nil {
		return "", err
	}
	events, err := history(ctx, c, run.GetID(), run.GetRunID())
	if err != nil {
		return "", err
	}
	changes, err := versionMarkers(events)
	if err != nil {
		return "", err
	}
	for _, m := range sc.markers {
		if !changes[m] {
			return "", fmt.Errorf("the history of %s records no version marker of change %q (it has %v): the scenario missed its path", run.GetID(), m, changes)
		}
	}
	bs, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(file, append(bs, '\n'), 0o644); err != nil {
		return "", err
	}
	lastEv := events[len(events)-1]
	return fmt.Sprintf("%s ends with event %d %s, %s", run.GetID(), lastEv.GetEventId(), lastEv.GetEventType(), result), nil
}

// startOrder starts ref's OrderWorkflow as relay.TemporalStarter does.
func startOrder(ctx context.Context, c client.Client, sc scenario, ref domain.OrderRef) (client.WorkflowRun, error) {
	in := workflows.OrderInput{Order: ref, ReservedAt: time.Now().UTC(), PaymentTimeout: sc.timeout, Provider: sc.provider}
	opts := client.StartWorkflowOptions{
		ID:                                       domain.WorkflowID(ref.OrderID),
		TaskQueue:                                workflows.TaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    workflows.SearchAttributes(ref, domain.StatusPending),
		Memo:                                     map[string]any{"summary": workflows.Summary(ref, "")},
		EnableEagerStart:                         true,
	}
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.OrderWorkflow, in)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	return run, nil
}

// driveOrder runs an order scenario: the order's workflow, sc.act once it
// awaits payment, and its end.
func driveOrder(ctx context.Context, c client.Client, _ *fakes, sc scenario, ref domain.OrderRef) (client.WorkflowRun, string, error) {
	run, err := startOrder(ctx, c, sc, ref)
	if err != nil {
		return nil, "", err
	}
	if sc.act != nil {
		// Act only once the workflow is parked in its selector, i.e. the
		// payment timer is in the history: an in-flight order.
		if err := waitForEvent(ctx, c, run.GetID(), run.GetRunID(), enumspb.EVENT_TYPE_TIMER_STARTED, ""); err != nil {
			return nil, "", err
		}
		if err := sc.act(ctx, c, run.GetID(), ref); err != nil {
			return nil, "", fmt.Errorf("act: %w", err)
		}
	}
	result, err := orderResult(ctx, run, sc.want)
	if err != nil {
		return nil, "", err
	}
	return run, result, nil
}

// orderResult waits for an order's run to end and checks it ended want.
func orderResult(ctx context.Context, run client.WorkflowRun, want domain.Status) (string, error) {
	var st workflows.OrderState
	if err := run.Get(ctx, &st); err != nil {
		return "", fmt.Errorf("workflow result: %w", err)
	}
	if st.Status != want {
		return "", fmt.Errorf("workflow ended %s (%q), want %s", st.Status, st.Reason, want)
	}
	return fmt.Sprintf("result %s %q", st.Status, st.Reason), nil
}

// versionMarkerName is the name of the marker workflow.GetVersion records
// (the Go SDK's, unexported there); its "change-id" detail is the change id.
const versionMarkerName = "Version"

// versionMarkers returns the change ids whose version marker events
// records.
func versionMarkers(events []*historypb.HistoryEvent) (map[string]bool, error) {
	changes := map[string]bool{}
	for _, ev := range events {
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != versionMarkerName {
			continue
		}
		var id string
		if err := converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &id); err != nil {
			return nil, fmt.Errorf("version marker of event %d: %w", ev.GetEventId(), err)
		}
		changes[id] = true
	}
	return changes, nil
}

func history(ctx context.Context, c client.Client, id, runID string) ([]*historypb.HistoryEvent, error) {
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		events = append(events, ev)
	}
	if len(events) == 0 {
		return nil, errors.New("empty history")
	}
	return events, nil
}

// waitForEvent waits for an event of type typ in the history (of an
// activity of type activityType, if given, for a scheduled or completed
// activity).
func waitForEvent(ctx context.Context, c client.Client, id, runID string, typ enumspb.EventType, activityType string) error {
	for {
		events, err := history(ctx, c, id, runID)
		if err != nil {
			return err
		}
		scheduled := map[int64]string{}
		for _, ev := range events {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
			}
			if ev.GetEventType() != typ {
				continue
			}
			name := scheduled[ev.GetEventId()]
			if done := ev.GetActivityTaskCompletedEventAttributes(); done != nil {
				name = scheduled[done.GetScheduledEventId()]
			}
			if activityType == "" || name == activityType {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", typ, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startTemporal runs `bin temporal` in memory on a free port, like
// internal/testenv.StartTemporal, and returns once it is ready.
func startTemporal(bin string) (stop func(), address string, err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "temporal", "--port", fmt.Sprint(port), "--ui-port=-1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	done := make(chan struct{})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "temporal ready") {
				ready <- true
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
		}
		ready <- false
	}()
	go func() { _ = cmd.Wait(); close(done) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	select {
	case ok := <-ready:
		if !ok {
			stop()
			return nil, "", errors.New("temporal exited before it was ready")
		}
	case <-time.After(90 * time.Second):
		stop()
		return nil, "", errors.New("temporal not ready within 90s")
	}
	return stop, fmt.Sprintf("127.0.0.1:%d", port), nil
}
