// Command recordhistories records event histories of OrderWorkflow against a
// real Temporal server, for the replay test in workflows/replay_test.go.
// Run it before changing the workflow's command sequence, so the histories
// of the version in production are kept (README, "Changing the workflow").
//
// It starts a Temporal dev server from the prebuilt seckill binary (or uses
// -address), runs a worker on the order task queue with the module's
// OrderWorkflow and fake activities, runs one workflow per scenario to
// completion and writes each history as JSON that
// worker.WorkflowReplayer.ReplayWorkflowHistoryFromJSONFile reads.
//
//	go build -o /tmp/seckill ./cmd/seckill
//	SECKILL_BIN=/tmp/seckill go run ./internal/recordhistories -out workflows/testdata/histories -prefix v1
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

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
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

func (f *fakes) MarkPaid(_ context.Context, ref domain.OrderRef) error {
	f.record(ref.OrderID, "MarkPaid")
	return nil
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

func (f *fakes) StartPayment(_ context.Context, in activities.StartPaymentInput) (payment.Payment, error) {
	f.record(in.Ref.OrderID, fmt.Sprintf("StartPayment(%d)", in.Attempt))
	return fakePayment(in.Ref, in.Attempt, payment.Pending), nil
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

func (f *fakes) MarkPaidWith(_ context.Context, in activities.PaidInput) error {
	f.record(in.Ref.OrderID, "MarkPaidWith("+in.PaymentID+")")
	return nil
}

// fakePayment is attempt n of ref's payment at the fake provider.
func fakePayment(ref domain.OrderRef, n int, state payment.State) payment.Payment {
	id := fmt.Sprintf("pay-%d-%d", ref.OrderID, n)
	return payment.Payment{Provider: fakeProvider, ID: id, OrderID: ref.OrderID,
		Amount: payment.Money{Minor: ref.AmountCents, Currency: "USD"}, State: state, RedirectURL: "https://pay.example/" + id}
}

// fakeProvider is the provider the payment scenarios start orders with.
const fakeProvider = "builtin"

// captured signals that ref's payment attempt n was captured for amount.
func captured(ctx context.Context, c client.Client, id string, ref domain.OrderRef, n int, amount int64) error {
	p := fakePayment(ref, n, payment.Captured)
	p.Captured = payment.Money{Minor: amount, Currency: "USD"}
	ev := workflows.PaymentEvent{EventID: fmt.Sprintf("ev-%s-%d", p.ID, amount), Provider: fakeProvider, Payment: p, At: time.Now().UTC()}
	return c.SignalWorkflow(ctx, id, "", workflows.SignalPayment, ev)
}

// scenario is one recorded history.
type scenario struct {
	name       string // file is <prefix>-<name>.json
	timeout    time.Duration
	outOfStock bool
	// provider, if set, is the order's payment provider (from
	// workflows.VersionPayments on).
	provider string
	// act runs once the workflow awaits payment (its timer has started);
	// nil waits for the workflow to end on its own.
	act  func(ctx context.Context, c client.Client, id string, ref domain.OrderRef) error
	want domain.Status
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

	f := &fakes{outOfStock: map[int64]bool{}, calls: map[int64][]string{}}
	w := sdkworker.New(c, workflows.TaskQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(workflows.OrderWorkflow, workflow.RegisterOptions{Name: "OrderWorkflow"})
	w.RegisterActivity(f) // registers each method under its name, like the real worker
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

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
		if sc.outOfStock {
			f.mu.Lock()
			f.outOfStock[ref.OrderID] = true
			f.mu.Unlock()
		}
		file := filepath.Join(out, prefix+"-"+sc.name+".json")
		last, err := record(ctx, c, sc, ref, file)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		f.mu.Lock()
		calls := f.calls[ref.OrderID]
		f.mu.Unlock()
		fmt.Printf("%s: %s ends with %s; activities %v\n", file, domain.WorkflowID(ref.OrderID), last, calls)
	}
	return nil
}

// record runs one scenario and writes its history to file. It returns a
// description of the last event.
func record(ctx context.Context, c client.Client, sc scenario, ref domain.OrderRef, file string) (string, error) {
	in := workflows.OrderInput{Order: ref, ReservedAt: time.Now().UTC(), PaymentTimeout: sc.timeout, Provider: sc.provider}
	// As relay.TemporalStarter starts them.
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
		return "", fmt.Errorf("start: %w", err)
	}
	if sc.act != nil {
		// Act only once the workflow is parked in its selector, i.e. the
		// payment timer is in the history: an in-flight order.
		if err := waitForEvent(ctx, c, run.GetID(), run.GetRunID(), enumspb.EVENT_TYPE_TIMER_STARTED, ""); err != nil {
			return "", err
		}
		if err := sc.act(ctx, c, run.GetID(), ref); err != nil {
			return "", fmt.Errorf("act: %w", err)
		}
	}
	var st workflows.OrderState
	if err := run.Get(ctx, &st); err != nil {
		return "", fmt.Errorf("workflow result: %w", err)
	}
	if st.Status != sc.want {
		return "", fmt.Errorf("workflow ended %s (%q), want %s", st.Status, st.Reason, sc.want)
	}
	events, err := history(ctx, c, run.GetID(), run.GetRunID())
	if err != nil {
		return "", err
	}
	bs, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(file, append(bs, '\n'), 0o644); err != nil {
		return "", err
	}
	lastEv := events[len(events)-1]
	return fmt.Sprintf("event %d %s, result %s %q", lastEv.GetEventId(), lastEv.GetEventType(), st.Status, st.Reason), nil
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
// activity of type activity, if given, for a completed activity).
func waitForEvent(ctx context.Context, c client.Client, id, runID string, typ enumspb.EventType, activity string) error {
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
			if done := ev.GetActivityTaskCompletedEventAttributes(); activity == "" || (done != nil && scheduled[done.GetScheduledEventId()] == activity) {
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
