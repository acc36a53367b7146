package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
)

// One purchase is one connected trace: the HTTP request, the reservation,
// the relay's start (the trace context travels with the intent through the
// Redis stream), and the workflow with every activity, local ones included,
// through Temporal's interceptor. The buyer's pay runs in a trace of its
// own that links to the order's, and both carry order.id.
func TestOnePurchaseIsOneTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	s := start(t, options{tracing: tp})
	sale := s.createSale(1)

	r := s.buy(sale.ID, "ann")
	if r.status != http.StatusAccepted {
		t.Fatalf("purchase: %d %s", r.status, r.body)
	}
	var p wire.Purchase
	r.decode(t, &p)
	s.waitStatus(p.OrderID, "ann", domain.StatusAwaitingPayment)
	if r := s.do("POST", "/v1/orders/"+p.OrderID+"/pay", s.token("ann", auth.RoleBuyer), nil); r.status != http.StatusOK {
		t.Fatalf("pay: %d %s", r.status, r.body)
	}
	// The workflow's span ends when the workflow does, after the payment.
	testenv.Eventually(t, time.Minute, func() error {
		if find(exp.GetSpans(), "RunWorkflow:OrderWorkflow", p.OrderID) == nil {
			return fmt.Errorf("no ended RunWorkflow span of order %s yet", p.OrderID)
		}
		return nil
	})
	spans := exp.GetSpans()

	purchase := find(spans, "POST /v1/sales/{id}/orders", p.OrderID)
	if purchase == nil {
		t.Fatalf("no purchase request span with order.id %s among %v", p.OrderID, names(spans))
	}
	order := inTrace(spans, purchase.SpanContext.TraceID())
	t.Logf("the order's trace: %v", names(order))
	for _, want := range []string{
		"POST /v1/sales/{id}/orders", "stock.Reserve", "relay.StartOrderWorkflow",
		"StartWorkflow:OrderWorkflow", "RunWorkflow:OrderWorkflow",
		// local activities: the forward steps and the buyer's notifications
		"StartActivity:PlaceOrder", "RunActivity:PlaceOrder",
		"StartActivity:Notify", "RunActivity:Notify",
		// an ordinary activity, run by the workflow once the buyer paid
		"StartActivity:MarkPaid", "RunActivity:MarkPaid",
	} {
		if !slices.Contains(names(order), want) {
			t.Errorf("the order's trace lacks %s: %v", want, names(order))
		}
	}
	// Connected: one root, the request; every other span's parent is in
	// the trace.
	ids := map[trace.SpanID]bool{}
	for _, sp := range order {
		ids[sp.SpanContext.SpanID()] = true
	}
	for _, sp := range order {
		switch {
		case sp.Name == purchase.Name && sp.SpanContext.SpanID() == purchase.SpanContext.SpanID():
			if sp.Parent.IsValid() {
				t.Errorf("the purchase request has a parent %s", sp.Parent.SpanID())
			}
		case !ids[sp.Parent.SpanID()]:
			t.Errorf("span %s hangs off a span outside the trace", sp.Name)
		}
	}
	for _, name := range []string{"stock.Reserve", "relay.StartOrderWorkflow", "RunWorkflow:OrderWorkflow", "RunActivity:PlaceOrder"} {
		if find(order, name, p.OrderID) == nil {
			t.Errorf("span %s lacks order.id %s", name, p.OrderID)
		}
	}

	// The pay request: its own trace, linked to the order's, carried into
	// the workflow's update handler.
	pay := find(spans, "order.pay", p.OrderID)
	if pay == nil {
		t.Fatalf("no order.pay span: %v", names(spans))
	}
	if pay.SpanContext.TraceID() == purchase.SpanContext.TraceID() {
		t.Error("the pay runs in the order's trace; want its own request trace")
	}
	if !slices.ContainsFunc(pay.Links, func(l sdktrace.Link) bool {
		return l.SpanContext.TraceID() == purchase.SpanContext.TraceID()
	}) {
		t.Errorf("order.pay does not link to the order's trace: %+v", pay.Links)
	}
	payTrace := names(inTrace(spans, pay.SpanContext.TraceID()))
	for _, want := range []string{"POST /v1/orders/{id}/pay", "order.pay", "UpdateWorkflow:pay", "HandleUpdate:pay"} {
		if !slices.Contains(payTrace, want) {
			t.Errorf("the pay's trace lacks %s: %v", want, payTrace)
		}
	}
}

// find returns the span called name that carries order.id = orderID.
func find(spans tracetest.SpanStubs, name, orderID string) *tracetest.SpanStub {
	for i, sp := range spans {
		if sp.Name == name && slices.Contains(sp.Attributes, attribute.String("order.id", orderID)) {
			return &spans[i]
		}
	}
	return nil
}

func inTrace(spans tracetest.SpanStubs, id trace.TraceID) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, sp := range spans {
		if sp.SpanContext.TraceID() == id {
			out = append(out, sp)
		}
	}
	return out
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = sp.Name
	}
	return out
}
