package reconcile_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/redisack"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// The memory of admitted purchases outlives the reconciler that made it: a
// pass remembers the buyers without an order row, Redis then loses the
// sale, and a new reconciler (a restarted worker) finds them lost, names
// them with their buyers, counts each once however many look, and admits
// again under its order id the one the sale still has a unit for. The
// audit names the other.
func TestLostAdmissionsAreFoundAfterARestart(t *testing.T) {
	rc, id := sale(t, 4, 1)
	ctx := context.Background()
	for i := range 3 {
		if _, err := rc.Stock.Reserve(ctx, id, fmt.Sprintf("late-%d", i), int64(2000+i), ""); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := rc.Sale(ctx, id); err != nil || rep.Remembered != 3 || rep.LostAdmissions != 0 {
		t.Fatalf("first pass: %+v %v; want 3 remembered, none lost", rep, err)
	}
	// Its order is written meanwhile: not lost.
	if err := rc.Store.DeductStock(ctx, ref(id, "late-2", 2002)); err != nil {
		t.Fatal(err)
	}
	if err := rc.Store.CreateOrder(ctx, ref(id, "late-2", 2002)); err != nil {
		t.Fatal(err)
	}
	// Redis restarts empty; an api warms the sale from the database (two
	// units) and a new buyer takes one of them.
	if err := rc.Stock.Client().FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	db, err := rc.Store.SaleSnapshot(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Stock.Load(ctx, orders.RedisSale(db.Sale, db.LiveBuyers())); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Stock.Reserve(ctx, id, "rival", 3000, ""); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	restarted := (&reconcile.Reconciler{Store: rc.Store, Stock: rc.Stock, Grace: time.Nanosecond}).WithMetrics(reg)
	rep, err := restarted.Sale(ctx, id)
	if err != nil || rep.LostAdmissions != 2 || !slices.Equal(rep.LostOrders, []int64{2000, 2001}) {
		t.Fatalf("after the loss and a restart: %+v %v; want 2 lost: 2000, 2001", rep, err)
	}
	if rep.Lost[0].UserID != "late-0" || rep.Lost[1].UserID != "late-1" {
		t.Fatalf("lost buyers %+v, want late-0 and late-1", rep.Lost)
	}
	if !slices.Equal(rep.Recovered, []int64{2000}) {
		t.Fatalf("recovered %v, want 2000 (the last unit), not 2001 (sold out)", rep.Recovered)
	}
	for name, want := range map[string]float64{"seckill_reconciler_lost_admissions_total": 2, "seckill_reconciler_recovered_admissions_total": 1} {
		if got := counter(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if held, ok, err := rc.Stock.Holder(ctx, id, "late-0"); err != nil || !ok || held != 2000 {
		t.Fatalf("late-0 holds %d %v %v, want order 2000 again", held, ok, err)
	}
	another := &reconcile.Reconciler{Store: rc.Store, Stock: rc.Stock, Grace: time.Nanosecond}
	if rep, err := another.Sale(ctx, id); err != nil || rep.LostAdmissions != 0 {
		t.Fatalf("a second reconciler: %+v %v; want the loss counted once", rep, err)
	}

	// The audit says so, from the same memory, and fails: 2000 is on its
	// way again, 2001 is lost.
	r, err := audit.Sale(ctx, audit.Sources{Store: rc.Store, Stock: rc.Stock}, id, audit.Expect{})
	if err != nil {
		t.Fatal(err)
	}
	want := []audit.LostPurchase{{OrderID: 2001, UserID: "late-1"}}
	if r.OK() || !slices.Equal(r.Lost, want) ||
		!strings.Contains(r.String(), "1 accepted purchases lost") || !strings.Contains(r.String(), "order 2001 (buyer late-1)") {
		t.Fatalf("audit: lost %+v, want %+v, and a violation naming them:\n%s", r.Lost, want, r)
	}
}

// An admission younger than LostAfter is not called lost: a relay may hold
// its intent, read before Redis lost it, and still start its workflow.
func TestLostAdmissionWaitsForLostAfter(t *testing.T) {
	rc, id := sale(t, 10, 0)
	ctx := context.Background()
	fresh := orderid.FirstAt(time.Now()) // an order id minted now
	if _, err := rc.Stock.Reserve(ctx, id, "new", fresh, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Sale(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := rc.Stock.Client().FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rc.LostAfter = time.Hour
	if rep, err := rc.Sale(ctx, id); err != nil || rep.LostAdmissions != 0 {
		t.Fatalf("within LostAfter: %+v %v; want nothing lost yet", rep, err)
	}
	rc.LostAfter = -1
	if rep, err := rc.Sale(ctx, id); err != nil || rep.LostAdmissions != 1 || rep.LostOrders[0] != fresh {
		t.Fatalf("LostAfter negative: %+v %v; want %d lost", rep, err, fresh)
	}
}

// With --admit-ack=replica a pass remembers only what a replica confirmed
// it held: an admission a failover may still take (its buyer answered
// UNCONFIRMED) is not remembered as a 202 until a replica has it.
func TestOnlyReplicatedAdmissionsAreRemembered(t *testing.T) {
	primary := testenv.StartRedisServer(t, false) // no replica yet
	rdb := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	t.Cleanup(func() { rdb.Close() })
	st := stock.New(rdb, redsync.New(goredis.NewPool(rdb)))
	st.Acknowledge(redisack.Policy{Replicas: 1, Timeout: 200 * time.Millisecond})
	db := testenv.Store(t)
	ctx := context.Background()
	sl, err := db.CreateSale(ctx, store.NewSale{Name: "r", PriceCents: 5, Stock: 3,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// Warm-up waits for a replica too: load the sale without it.
	plain := stock.New(rdb, redsync.New(goredis.NewPool(rdb)))
	if _, err := plain.Warm(ctx, stock.Sale{ID: sl.ID, PriceCents: 5, Remaining: 3, StartsAt: sl.StartsAt, EndsAt: sl.EndsAt}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, sl.ID, "una", 5000, ""); !redisack.IsNotAcknowledged(err) {
		t.Fatalf("reserve with no replica: %v, want not acknowledged", err)
	}
	rc := &reconcile.Reconciler{Store: db, Stock: st, Grace: time.Nanosecond}
	// The pass's own writes wait for a replica too and fail (its next
	// pass repairs); what matters here is what it remembered.
	if rep, _ := rc.Sale(ctx, sl.ID); rep.Remembered != 0 {
		t.Fatalf("no replica: %+v; want nothing remembered", rep)
	}
	if got, err := db.UnplacedAdmissions(ctx, sl.ID); err != nil || len(got) != 0 {
		t.Fatalf("remembered %+v %v with no replica", got, err)
	}

	_, port, _ := net.SplitHostPort(primary.Addr())
	testenv.StartRedisServer(t, false, "--replicaof", "127.0.0.1", port)
	testenv.Eventually(t, 30*time.Second, func() error { return st.AwaitReplicas(ctx) })
	if rep, err := rc.Sale(ctx, sl.ID); err != nil || rep.Remembered != 1 {
		t.Fatalf("with a replica: %+v %v; want una remembered", rep, err)
	}
	got, err := db.UnplacedAdmissions(ctx, sl.ID)
	if err != nil || len(got) != 1 || got[0].OrderID != 5000 || got[0].UserID != "una" || !got[0].Replicated {
		t.Fatalf("remembered %+v %v; want una's 5000, replicated", got, err)
	}
}

func ref(saleID int64, user string, orderID int64) domain.OrderRef {
	return domain.OrderRef{OrderID: orderID, SaleID: saleID, UserID: user, AmountCents: 5}
}

// A purchase lost in a sale that ended before the next pass is still
// found (Sale reconciles only open sales), and not admitted again.
func TestLostAdmissionsOfAnEndedSaleAreFound(t *testing.T) {
	rc, id := sale(t, 5, 0)
	rc.LostAfter = -1
	ctx := context.Background()
	order := orderid.FirstAt(time.Now())
	if _, err := rc.Stock.Reserve(ctx, id, "ned", order, ""); err != nil {
		t.Fatal(err)
	}
	if reps, err := rc.All(ctx); err != nil || len(reps) != 1 || reps[0].Remembered != 1 {
		t.Fatalf("pass while open: %+v %v; want ned remembered", reps, err)
	}
	if _, _, err := rc.Store.EndSale(ctx, id, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := rc.Stock.Client().FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	restarted := &reconcile.Reconciler{Store: rc.Store, Stock: rc.Stock, LostAfter: -1}
	reps, err := restarted.All(ctx)
	if err != nil || len(reps) != 1 || reps[0].SaleID != id || !slices.Equal(reps[0].LostOrders, []int64{order}) ||
		reps[0].Lost[0].UserID != "ned" || len(reps[0].Recovered) != 0 {
		t.Fatalf("pass after the end: %+v %v; want ned's %d lost, not recovered", reps, err, order)
	}
	if reps, err := restarted.All(ctx); err != nil || len(reps) != 0 {
		t.Fatalf("next pass: %+v %v; want the loss counted once", reps, err)
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// An admission whose workflow was started is not lost when Redis loses
// it: the workflow writes its row.
func TestStartedAdmissionIsNotCalledLost(t *testing.T) {
	tp := testenv.StartTemporal(t)
	tc, err := client.Dial(client.Options{HostPort: tp.Address()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	rc, id := sale(t, 5, 0)
	rc.Temporal = tc
	ctx := context.Background()
	for i := range 2 {
		if _, err := rc.Stock.Reserve(ctx, id, fmt.Sprintf("b%d", i), int64(2000+i), ""); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := rc.Sale(ctx, id); err != nil || rep.Remembered != 2 {
		t.Fatalf("first pass: %+v %v; want 2 remembered", rep, err)
	}
	// The relay started 2000's workflow (no worker runs it here).
	if _, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: domain.WorkflowID(2000), TaskQueue: "seckill-orders"}, "OrderWorkflow"); err != nil {
		t.Fatal(err)
	}
	if err := rc.Stock.Client().FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if rep, err := rc.Sale(ctx, id); err != nil || !slices.Equal(rep.LostOrders, []int64{2001}) {
		t.Fatalf("after the loss: %+v %v; want only 2001 lost", rep, err)
	}
}

// A pass that marked a purchase lost and stopped there (or whose
// re-admission failed) leaves it to the next pass, which admits it again
// while its sale is open, once: a pass after that finds the buyer held.
func TestLostAdmissionMarkedByAStoppedPassIsAdmittedAgain(t *testing.T) {
	rc, id := sale(t, 3, 0)
	rc.LostAfter = -1
	ctx := context.Background()
	order := orderid.FirstAt(time.Now())
	if err := rc.Store.RememberAdmissions(ctx, id, []store.Buyer{{UserID: "lena", OrderID: order}}, false); err != nil {
		t.Fatal(err)
	}
	if err := rc.Stock.Client().FlushDB(ctx).Err(); err != nil { // Redis lost the sale
		t.Fatal(err)
	}
	if marked, err := rc.Store.MarkAdmissionLost(ctx, order); err != nil || !marked { // the stopped pass
		t.Fatalf("mark lost: %v %v", marked, err)
	}
	rep, err := rc.Sale(ctx, id)
	if err != nil || rep.LostAdmissions != 0 || !slices.Equal(rep.Recovered, []int64{order}) {
		t.Fatalf("next pass: %+v %v; want %d admitted again, the loss not counted twice", rep, err, order)
	}
	if held, ok, err := rc.Stock.Holder(ctx, id, "lena"); err != nil || !ok || held != order {
		t.Fatalf("lena holds %d %v %v, want order %d", held, ok, err, order)
	}
	if rep, err := rc.Sale(ctx, id); err != nil || len(rep.Recovered) != 0 {
		t.Fatalf("the pass after: %+v %v; want nothing admitted again", rep, err)
	}
}

// A remembered admission is held while Redis holds its buyer, under its
// order or another: a buyer with another order of the sale bought again
// and has their unit.
func TestHeldJudgesAnAdmissionByItsBuyer(t *testing.T) {
	a := store.Admission{OrderID: 1, UserID: "u", Replicated: true}
	for _, c := range []struct {
		name   string
		buyers map[string]int64
		want   bool
	}{
		{"its own order", map[string]int64{"u": 1}, true},
		{"another order", map[string]int64{"u": 2}, true},
		{"no order", map[string]int64{"v": 1}, false},
	} {
		if got := reconcile.Held(a, c.buyers); got != c.want {
			t.Errorf("%s: Held %v, want %v", c.name, got, c.want)
		}
	}
}
