package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/ent"
)

// AuditCmd checks the invariants of docs/design.md §2 for one sale or all of them.
type AuditCmd struct {
	Services
	Sale      []int64 `name:"sale" help:"Sale ids to audit (default: every sale)."`
	Settled   bool    `name:"settled" help:"Also check what holds when no order is on its way (conservation, Redis = DB)."`
	Quiescent bool    `name:"quiescent" help:"Also require that no order workflow is running."`
	JSON      bool    `name:"json" help:"Print the reports as JSON."`
}

func (c *AuditCmd) Run(ctx context.Context) error {
	// With Temporal the settled audit also finds orders whose workflow
	// closed without ending them.
	d, err := c.connect(ctx, c.Settled || c.Quiescent, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	ids := c.Sale
	if len(ids) == 0 {
		// Every sale, however many: the audit pages through them.
		err := d.store.AllSales(ctx, func(s *ent.Sale) error {
			ids = append(ids, s.ID)
			return nil
		})
		if err != nil {
			return err
		}
	}
	src := audit.Sources{Store: d.store, Stock: d.stock, Temporal: d.temporal}
	var reports []audit.Report
	failed := 0
	for _, id := range ids {
		r, err := audit.Sale(ctx, src, id, audit.Expect{Settled: c.Settled, Quiescent: c.Quiescent})
		if err != nil {
			return err
		}
		if !r.OK() {
			failed++
		}
		reports = append(reports, r)
		if !c.JSON {
			fmt.Println(r.String())
		}
	}
	if c.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			return err
		}
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d sales violate an invariant", failed, len(ids))}
	}
	return nil
}
