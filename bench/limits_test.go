package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
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
		}, want: func(r *Result) error {
			switch {
			case !near(r.AdmissionVsCeil, 6), !near(r.AdmissionVsHTTP, 2), !near(r.P99VsHTTP, 3):
				return fmt.Errorf("ratios %v %v %v, want 6 2 3", r.AdmissionVsCeil, r.AdmissionVsHTTP, r.P99VsHTTP)
			}
			return nil
		}},
		{name: "nothing measured", r: Result{Requests: 10, AdmissionSeconds: 1, OrdersPerSecond: 5, AllCreated: true},
			want: func(r *Result) error {
				if r.AdmissionVsCeil != 0 || r.AdmissionVsHTTP != 0 || r.P99VsHTTP != 0 {
					return fmt.Errorf("ratios without limits: %+v", r)
				}
				return nil
			}},
		{name: "a limit measured as zero is no ratio", r: Result{AdmissionSeconds: 2, Latency: Latency{P99: 10},
			HTTPLimit: &HTTPLimit{}},
			want: func(r *Result) error {
				if r.AdmissionVsHTTP != 0 || r.P99VsHTTP != 0 || math.IsInf(r.AdmissionVsHTTP, 0) {
					return fmt.Errorf("ratios over zero: %v %v", r.AdmissionVsHTTP, r.P99VsHTTP)
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
	if code, _ := tg.purchase(ctx, api.SaleID, "token-of-carol"); code != wire.CodeSoldOut {
		t.Fatalf("purchase answered %s, want SOLD_OUT", code)
	}
}
