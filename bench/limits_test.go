package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
)

func TestRatios(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for _, tc := range []struct {
		name string
		r    Result
		want func(r *Result) error
	}{
		{name: "every limit measured", r: Result{
			Requests: 6000, Accepted: 4000, AllCreated: true,
			AdmissionSeconds: 3, Latency: Latency{P99: 60}, OrdersPerSecond: 40,
			CeilingSeconds: 0.5,
			HTTPLimit:      &HTTPLimit{Seconds: 1.5, Latency: Latency{P99: 20}},
			Engine:         &EngineCeiling{EngineProbe: wire.EngineProbe{Workflows: 1000, WorkflowsPerSec: 80}},
			CPU: &CPU{Engine: &CPUPhase{SystemSeconds: 12}, Admission: &CPUPhase{SystemSeconds: 3, LoadGeneratorSeconds: 1.2},
				Saga: &CPUPhase{SystemSeconds: 100}},
		}, want: func(r *Result) error {
			switch {
			case !near(r.AdmissionVsCeil, 6), !near(r.AdmissionVsHTTP, 2), !near(r.P99VsHTTP, 3), !near(r.SagaVsEngine, 0.5):
				return fmt.Errorf("ratios %v %v %v %v, want 6 2 3 0.5", r.AdmissionVsCeil, r.AdmissionVsHTTP, r.P99VsHTTP, r.SagaVsEngine)
			case !near(r.CPU.AdmissionMsPerRequest, 0.5), !near(r.CPU.LoadGeneratorMsPerRequest, 0.2), !near(r.CPU.SagaMsPerOrder, 25),
				!near(r.CPU.EngineMsPerWorkflow, 12):
				return fmt.Errorf("cpu %+v, want 0.5 ms a request, 0.2 for the load generator, 25 ms an order, 12 ms a no-op workflow", r.CPU)
			}
			return nil
		}},
		{name: "nothing measured", r: Result{Requests: 10, AdmissionSeconds: 1, OrdersPerSecond: 5, AllCreated: true},
			want: func(r *Result) error {
				if r.AdmissionVsCeil != 0 || r.AdmissionVsHTTP != 0 || r.P99VsHTTP != 0 || r.SagaVsEngine != 0 {
					return fmt.Errorf("ratios without limits: %+v", r)
				}
				return nil
			}},
		{name: "admission only: no saga ratio, no saga cpu", r: Result{
			Requests: 100, Accepted: 50, AdmissionOnly: true, AdmissionSeconds: 2,
			Engine: &EngineCeiling{EngineProbe: wire.EngineProbe{WorkflowsPerSec: 80}},
			CPU:    &CPU{Admission: &CPUPhase{SystemSeconds: 1}},
		}, want: func(r *Result) error {
			if r.SagaVsEngine != 0 || r.CPU.SagaMsPerOrder != 0 || !near(r.CPU.AdmissionMsPerRequest, 10) {
				return fmt.Errorf("saga vs engine %v, saga ms %v, admission ms %v", r.SagaVsEngine, r.CPU.SagaMsPerOrder, r.CPU.AdmissionMsPerRequest)
			}
			return nil
		}},
		{name: "not every order created: no cpu per order", r: Result{
			Requests: 100, Accepted: 50, AdmissionSeconds: 2, OrdersPerSecond: 10,
			CPU: &CPU{Admission: &CPUPhase{SystemSeconds: 1}, Saga: &CPUPhase{SystemSeconds: 9}},
		}, want: func(r *Result) error {
			if r.CPU.SagaMsPerOrder != 0 {
				return fmt.Errorf("saga ms per order %v with orders missing", r.CPU.SagaMsPerOrder)
			}
			return nil
		}},
		{name: "a limit measured as zero is no ratio", r: Result{AdmissionSeconds: 2, Latency: Latency{P99: 10},
			HTTPLimit: &HTTPLimit{}, Engine: &EngineCeiling{}, OrdersPerSecond: 3},
			want: func(r *Result) error {
				if r.AdmissionVsHTTP != 0 || r.P99VsHTTP != 0 || r.SagaVsEngine != 0 ||
					math.IsInf(r.AdmissionVsHTTP, 0) || math.IsNaN(r.SagaVsEngine) {
					return fmt.Errorf("ratios over zero: %v %v %v", r.AdmissionVsHTTP, r.P99VsHTTP, r.SagaVsEngine)
				}
				return nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.ratios()
			if err := tc.want(&r); err != nil {
				t.Fatal(err)
			}
			_ = r.Table() // renders whatever was measured
		})
	}
}

// The bare handler answers as the api does, so the same client code
// decodes it: a 202 purchase, then the api's problem codes.
func TestBareAPIAnswersLikeTheAPI(t *testing.T) {
	ctx := context.Background()
	_, db := testenv.Redis(t)
	start := BareReserveAPI(&redis.Options{Addr: testenv.RedisAddr(t)}, db)
	api, err := start(ctx, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	c := client.New(api.URL, "", nil)

	p, err := c.WithToken("token-of-alice").Purchase(ctx, api.SaleID, "")
	if err != nil || p.OrderID == "" || p.Status != domain.StatusPending || p.WorkflowID != "order-"+p.OrderID {
		t.Fatalf("first purchase: %+v, %v", p, err)
	}
	for token, code := range map[string]string{"token-of-alice": wire.CodeAlreadyPurchased, "token-of-bob": wire.CodeSoldOut} {
		_, err := c.WithToken(token).Purchase(ctx, api.SaleID, "")
		var refused *client.Error
		if !errors.As(err, &refused) || refused.StatusCode != 409 || refused.Problem.Code != code {
			t.Fatalf("%s: %v, want 409 %s", token, err, code)
		}
	}
	// The same client code path as the wave's.
	tg := newTarget(api.URL, 1)
	if a := tg.purchase(ctx, api.SaleID, "token-of-carol", ""); a.code != wire.CodeSoldOut {
		t.Fatalf("purchase answered %s, want SOLD_OUT", a.code)
	}
}

// The scratch sales of the ceiling and the HTTP limit need an empty
// database: one in use (a seckill's, whose relay would start orders for
// the scratch intents) is refused, and left as it was.
func TestScratchSalesRefuseADatabaseInUse(t *testing.T) {
	ctx := context.Background()
	rdb, db := testenv.Redis(t)
	if err := rdb.Set(ctx, "someone-elses", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	opts := &redis.Options{Addr: testenv.RedisAddr(t)}
	if _, err := RedisCeiling(opts, db)(ctx, 10, 5, 2); err == nil || !strings.Contains(err.Error(), "--ceiling-db") {
		t.Errorf("ceiling on a database in use: %v, want refused naming --ceiling-db", err)
	}
	if api, err := BareReserveAPI(opts, db)(ctx, 5, 2); err == nil {
		api.Close()
		t.Errorf("HTTP limit on a database in use: started, want refused")
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 1 {
		t.Errorf("the database holds %d keys (%v), want only its own 1", n, err)
	}
}
