package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/push"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
	"github.com/seckill/seckill/worker"
	"github.com/seckill/seckill/workflows"
)

// The whole order core against real Postgres, Redis and Temporal: a sale is
// raced, every winner's saga reaches AWAITING_PAYMENT, half pay and half
// cancel, and the invariants of docs/design.md §2 hold at the end.
func TestSagaEndToEndPayAndCancel(t *testing.T) {
	ctx := context.Background()
	db := testenv.Store(t)
	rdb, _ := testenv.Redis(t)
	st := stock.New(rdb, redsync.New(goredis.NewPool(rdb)))
	tp := testenv.StartTemporal(t)
	tc := tp.Client()

	w := worker.New(tc, &activities.Activities{Store: db, Stock: st, Events: push.NewPublisher(rdb)}, worker.Options{})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	r := relay.New(st, relay.NewTemporalStarter(tc), relay.Options{})
	rctx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() { _ = r.Run(rctx); close(relayDone) }()
	t.Cleanup(func() { stopRelay(); <-relayDone })

	const units, buyers = 100, 300
	sale, err := db.CreateSale(ctx, store.NewSale{Name: "console", PriceCents: 29900, Stock: units,
		StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Warm(ctx, stock.Sale{ID: sale.ID, PriceCents: sale.PriceCents, Remaining: sale.Stock,
		StartsAt: sale.StartsAt, EndsAt: sale.EndsAt}); err != nil {
		t.Fatal(err)
	}

	ids := orderid.New(9)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners = map[int64]string{}
		soldOut int
	)
	for i := range buyers {
		wg.Go(func() {
			user := fmt.Sprintf("buyer-%03d", i)
			id, err := ids.Next()
			if err == nil {
				id, err = st.Reserve(ctx, sale.ID, user, id, "")
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners[id] = user
			case errors.Is(err, domain.ErrSoldOut):
				soldOut++
			default:
				t.Errorf("reserve: %v", err)
			}
		})
	}
	wg.Wait()
	if len(winners) != units || soldOut != buyers-units {
		t.Fatalf("%d winners, %d sold out; want %d and %d", len(winners), soldOut, units, buyers-units)
	}

	// Every winner's saga writes its order and waits for payment.
	testenv.Eventually(t, 3*time.Minute, func() error {
		n, err := db.Client().Order.Query().
			Where(order.SaleID(sale.ID), order.StatusEQ(order.StatusAWAITING_PAYMENT)).Count(ctx)
		if err == nil && n != units {
			err = fmt.Errorf("%d of %d orders awaiting payment", n, units)
		}
		return err
	})
	src := audit.Sources{Store: db, Stock: st, Temporal: tc}
	rep, err := audit.Sale(ctx, src, sale.ID, audit.Expect{Settled: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.DBStock != 0 || rep.LiveOrders != units {
		t.Fatalf("after admission:\n%s", rep)
	}

	// Half pay, half cancel.
	paid, cancelled := 0, 0
	for id := range winners {
		name, want, args := workflows.UpdateCancel, domain.StatusCancelled, []any{workflows.CancelRequest{}}
		if paid < units/2 {
			name, want, args = workflows.UpdatePay, domain.StatusPaid, nil
			paid++
		} else {
			cancelled++
		}
		h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: domain.WorkflowID(id), UpdateName: name, Args: args,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		var state workflows.OrderState
		if err == nil {
			err = h.Get(ctx, &state)
		}
		if err != nil || state.Status != want {
			t.Fatalf("%s order %d: %+v, %v; want %s", name, id, state, err, want)
		}
	}
	testenv.Eventually(t, 3*time.Minute, func() error {
		rep, err = audit.Sale(ctx, src, sale.ID, audit.Expect{Quiescent: true})
		if err != nil {
			return err
		}
		if !rep.OK() {
			return errors.New(rep.String())
		}
		return nil
	})
	if rep.ByStatus[domain.StatusPaid] != paid || rep.ByStatus[domain.StatusCancelled] != cancelled ||
		rep.DBStock != cancelled || rep.RedisRemaining != cancelled {
		t.Fatalf("at the end:\n%s", rep)
	}
	// Each finished workflow reports the status its order row has.
	for id := range winners {
		var state workflows.OrderState
		run := tc.GetWorkflow(ctx, domain.WorkflowID(id), "")
		if err := run.Get(ctx, &state); err != nil {
			t.Fatal(err)
		}
		o, err := db.Order(ctx, id)
		if err != nil || string(o.Status) != string(state.Status) {
			t.Fatalf("order %d: row %v (%v), workflow %s", id, o, err, state.Status)
		}
	}
	// The cancelled units can be bought again.
	late, err := ids.Next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, sale.ID, "late-buyer", late, ""); err != nil {
		t.Fatalf("buying a returned unit: %v", err)
	}
}
