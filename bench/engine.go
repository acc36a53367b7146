package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/client"
)

// EngineCeiling is the Temporal engine's own rate for the orders, as the
// api's engine probe measured it (POST /v1/admin/engine-probe): no-op
// workflows started by the relays wherever they run, the way they start
// orders, run by the order worker, timed by the Temporal server.
// The ceiling and the saga are thus measured in the same shape, whatever
// the topology; the load averages and the CPU of the phase (CPU.Engine)
// are the conditions it was measured in.
type EngineCeiling struct {
	wire.EngineProbe
	LoadBefore string `json:"load_average_before"`
	LoadAfter  string `json:"load_average_after"`
}

// engineCeiling runs the api's engine probe of o.EngineWorkflows
// workflows as admin, within o.Wait. It has a client of its own: the
// target's bounds each request by the wave's timeout, and a probe takes
// as long as the engine needs.
func (c *target) engineCeiling(ctx context.Context, o Options, admin string) (EngineCeiling, error) {
	if o.Wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Wait)
		defer cancel()
	}
	e := EngineCeiling{LoadBefore: loadAverage()}
	begin := time.Now()
	p, err := client.New(c.base, admin, nil).EngineProbe(ctx, o.EngineWorkflows)
	if err != nil {
		return e, fmt.Errorf("engine probe of %d workflows (after %.0f s): %w", o.EngineWorkflows, time.Since(begin).Seconds(), err)
	}
	e.EngineProbe, e.LoadAfter = p, loadAverage()
	return e, nil
}
