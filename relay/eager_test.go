package relay

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/workflows"
)

// startRecorder is a Temporal client that records the options of the
// workflows it is asked to start, and starts none.
type startRecorder struct {
	client.Client
	opts []client.StartWorkflowOptions
}

func (c *startRecorder) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	c.opts = append(c.opts, o)
	return nil, nil
}

// Only an eager starter asks for eager starts, orders and probes alike:
// the SDK reads a lazy client's capabilities unlocked on an eager start,
// which races with another first use of the client (a worker started on
// it later), so a relay without a worker of its own does not ask.
func TestOnlyAnEagerStarterAsksForEagerStarts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		new   func(client.Client) *TemporalStarter
		eager bool
	}{
		{"plain", NewTemporalStarter, false},
		{"eager", NewEagerTemporalStarter, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &startRecorder{}
			s := tc.new(c)
			in := workflows.OrderInput{Order: domain.OrderRef{OrderID: 7, SaleID: 1, UserID: "u"}}
			if _, err := s.Start(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			if err := s.StartProbe(context.Background(), "engine-probe-x-0", time.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if len(c.opts) != 2 {
				t.Fatalf("%d starts, want 2", len(c.opts))
			}
			for _, o := range c.opts {
				if o.EnableEagerStart != tc.eager {
					t.Errorf("start of %s: EnableEagerStart %v, want %v", o.ID, o.EnableEagerStart, tc.eager)
				}
			}
		})
	}
}
