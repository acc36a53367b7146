package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
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
	// Legacy: the api predates keep, and left its workflows in place
	// (nothing to delete after the run).
	Legacy bool `json:"legacy_api,omitempty"`
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
	// Kept: the server's work of deleting them would land in the phases
	// measured next. Run deletes them at its end (deleteProbes).
	api := client.New(c.base, admin, nil)
	p, err := api.EngineProbe(ctx, wire.EngineProbeBody{Workflows: o.EngineWorkflows, Keep: true})
	var refused *client.Error
	if errors.As(err, &refused) && refused.StatusCode == http.StatusUnprocessableEntity && strings.Contains(refused.Error()+fmt.Sprint(refused.Problem.Errors), "keep") {
		// An api from before keep (alternating pairs run this bench
		// against older builds): its probe deletes nothing anyway.
		e.Legacy = true
		p, err = api.EngineProbe(ctx, wire.EngineProbeBody{Workflows: o.EngineWorkflows})
	}
	if err != nil {
		return e, fmt.Errorf("engine probe of %d workflows (after %.0f s): %w", o.EngineWorkflows, time.Since(begin).Seconds(), err)
	}
	e.EngineProbe, e.LoadAfter = p, loadAverage()
	return e, nil
}

// deleteProbes deletes the probe's workflows once the run has measured
// everything, so that the Temporal Web UI lists the sale's orders alone. A
// failure is reported, not fatal: they stay listed, and a later probe
// deletes them.
func (c *target) deleteProbes(ctx context.Context, admin string) (ProbeCleanup, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	p, err := client.New(c.base, admin, nil).DeleteEngineProbes(ctx)
	return ProbeCleanup{ProbeCleanup: p}, err
}

// ProbeCleanup is what deleting the probe's workflows did, or why it
// could not.
type ProbeCleanup struct {
	wire.ProbeCleanup
	Error string `json:"error,omitempty"`
}
