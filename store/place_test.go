package store_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent/migrate"
	"github.com/seckill/seckill/ent/stockmovement"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/store"
)

// countingStore is a migrated store on a fresh Postgres database whose
// statements are counted.
func countingStore(t *testing.T) (*store.Store, func() int64, string) {
	t.Helper()
	url := testenv.DatabaseURL(t)
	db, n := testenv.CountingDB(t, url)
	st := store.OpenPostgresDB(db)
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st, func() int64 { return n.Swap(0) }, url
}

// dropPlaceFunction drops the placing function from the database at url,
// as a database not migrated since it came, and returns a connection to
// that database.
func dropPlaceFunction(t *testing.T, url string) *sql.DB {
	t.Helper()
	admin, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	dropFunction(t, admin)
	return admin
}

func dropFunction(t *testing.T, db *sql.DB) {
	t.Helper()
	if _, err := db.Exec(`DROP FUNCTION seckill_place_order_v1`); err != nil {
		t.Fatal(err)
	}
}

// On Postgres an order is placed in one statement, seckill_place_order_v1,
// where the transaction through ent takes six (docs/design.md §4.2).
func TestPlaceOrderIsOneStatementOnPostgres(t *testing.T) {
	ctx := context.Background()
	st, statements, _ := countingStore(t)
	sale := newSale(t, st, 5)
	statements()
	ref := domain.OrderRef{OrderID: orderid.FirstAt(time.Now()), SaleID: sale, UserID: "uma", AmountCents: 49900}
	if err := st.PlaceOrder(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if n := statements(); n != 1 {
		t.Fatalf("placing an order sent %d statements, want 1", n)
	}
	if got := stockOf(t, st, sale); got != 4 {
		t.Fatalf("stock = %d, want 4", got)
	}
	// Retried after its commit (the answer lost): the DEDUCT row makes
	// the function raise, and the transaction answers, as it always has.
	if err := st.PlaceOrder(ctx, ref); err != nil {
		t.Fatalf("retried place: %v", err)
	}
	if got, k := stockOf(t, st, sale), ledger(t, st, ref.OrderID); got != 4 || len(k) != 1 {
		t.Fatalf("a retry left stock %d and ledger %v, want 4 and one DEDUCT", got, k)
	}
}

// The function writes what the transaction writes: the same row and the
// same ledger row, field for field.
func TestPlaceOrderWritesWhatItsTransactionWrites(t *testing.T) {
	ctx := context.Background()
	st, statements, _ := countingStore(t)
	sale := newSale(t, st, 5)
	first := orderid.FirstAt(time.Now())
	admitted := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	byFunction := domain.OrderRef{OrderID: first, SaleID: sale, UserID: "vic", AmountCents: 49900, IdempotencyKey: "k-1", AdmittedAt: admitted}
	byTx := domain.OrderRef{OrderID: first + 1, SaleID: sale, UserID: "wen", AmountCents: 49900, IdempotencyKey: "k-1", AdmittedAt: admitted}
	before := time.Now()
	statements()
	if err := st.PlaceOrder(ctx, byFunction); err != nil {
		t.Fatal(err)
	}
	if n := statements(); n != 1 {
		t.Fatalf("PlaceOrder sent %d statements: the function did not place the order", n)
	}
	if err := st.PlaceTx(ctx, byTx); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	type row struct {
		SaleID, AmountCents                                int64
		Quantity                                           int
		Status, Reason, Key, Provider, PaymentID, RefundID string
		RefundReason                                       string
		AdmittedAt                                         time.Time
		PaidAtSet, RefundedAtSet                           bool
	}
	rowOf := func(id int64) row {
		o, err := st.Client().Order.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		r := row{
			SaleID: o.SaleID, AmountCents: o.AmountCents, Quantity: o.Quantity, Status: string(o.Status), Reason: o.Reason,
			Key: o.IdempotencyKey, Provider: o.PaymentProvider, PaymentID: o.PaymentID, RefundID: o.RefundID,
			RefundReason: o.RefundReason, PaidAtSet: o.PaidAt != nil, RefundedAtSet: o.RefundedAt != nil,
		}
		for _, at := range []time.Time{o.CreatedAt, o.UpdatedAt} {
			if at.Before(before.Add(-time.Millisecond)) || at.After(after) {
				t.Errorf("order %d: created or updated at %s, not within the calls (%s–%s)", id, at, before, after)
			}
		}
		if o.AdmittedAt != nil {
			r.AdmittedAt = o.AdmittedAt.UTC()
		}
		return r
	}
	if fa, ta := rowOf(byFunction.OrderID), rowOf(byTx.OrderID); fa != ta {
		t.Fatalf("rows differ:\nfunction    %+v\ntransaction %+v", fa, ta)
	}
	type move struct {
		SaleID int64
		Kind   stockmovement.Kind
		Delta  int
	}
	movesOf := func(id int64) []move {
		ms, err := st.Client().StockMovement.Query().Where(stockmovement.OrderID(id)).All(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []move
		for _, m := range ms {
			if m.CreatedAt.Before(before.Add(-time.Millisecond)) || m.CreatedAt.After(after) {
				t.Errorf("ledger row of order %d made at %s, not within the calls", id, m.CreatedAt)
			}
			out = append(out, move{m.SaleID, m.Kind, m.Delta})
		}
		return out
	}
	fm, tm := movesOf(byFunction.OrderID), movesOf(byTx.OrderID)
	if len(fm) != 1 || len(tm) != 1 || fm[0] != tm[0] {
		t.Fatalf("ledger rows differ: function %+v, transaction %+v", fm, tm)
	}
	if got := stockOf(t, st, sale); got != 3 {
		t.Fatalf("stock = %d, want 3", got)
	}
}

// A worker upgraded before `seckill migrate` ran meets a database without
// the function: it places every order through the transaction, and asks
// for the function again only after a pause (placeOffFor).
func TestPlaceOrderWithoutTheFunction(t *testing.T) {
	ctx := context.Background()
	st, statements, url := countingStore(t)
	admin := dropPlaceFunction(t, url)
	sale := newSale(t, st, 5)
	first := orderid.FirstAt(time.Now())
	var counts []int64
	for i := range 2 {
		statements()
		ref := domain.OrderRef{OrderID: first + int64(i), SaleID: sale, UserID: "x" + string(rune('a'+i)), AmountCents: 1}
		if err := st.PlaceOrder(ctx, ref); err != nil {
			t.Fatalf("place %d: %v", i, err)
		}
		counts = append(counts, statements())
	}
	if counts[1] != counts[0]-1 {
		t.Fatalf("statements per placing %v: the second should skip the missing function", counts)
	}
	if got := stockOf(t, st, sale); got != 3 {
		t.Fatalf("stock = %d, want 3", got)
	}
	// Migrating again creates it, also when processes migrate at once:
	// two creations of one function at once fail without the lock
	// ("duplicate key value violates unique constraint", "tuple
	// concurrently updated").
	for round := range 10 {
		if round > 0 {
			dropFunction(t, admin)
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if err := st.MigratePlaceFunction(ctx); err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		wg.Wait()
	}
	if _, err := admin.Exec(`SELECT 'seckill_place_order_v1'::regproc`); err != nil {
		t.Fatalf("after migrating: %v", err)
	}
}

// The function names every column of the order row that cannot be NULL:
// ent fills in its defaults in Go, not in the database, so a column added
// to the schema would be missing from the function's row.
func TestPlaceFunctionNamesEveryRequiredColumn(t *testing.T) {
	list := store.PlaceBody[strings.Index(store.PlaceBody, "INSERT INTO orders (")+len("INSERT INTO orders ("):]
	named := map[string]bool{}
	for _, c := range strings.Split(list[:strings.Index(list, ")")], ",") {
		named[strings.TrimSpace(c)] = true
	}
	for _, c := range migrate.OrdersColumns {
		if !c.Nullable && !named[c.Name] {
			t.Errorf("the function's order row leaves out %q, which cannot be NULL", c.Name)
		}
	}
}

// Placings refused the function at once say why once, not each.
func TestARefusedFunctionIsLoggedOnce(t *testing.T) {
	ctx := context.Background()
	st, _, url := countingStore(t)
	dropPlaceFunction(t, url)
	var logs testenv.SyncBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	sale := newSale(t, st, 16)
	first := orderid.FirstAt(time.Now())
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			ref := domain.OrderRef{OrderID: first + int64(i), SaleID: sale, UserID: "y" + string(rune('a'+i)), AmountCents: 1}
			if err := st.PlaceOrder(ctx, ref); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := strings.Count(logs.String(), "placing orders through the transaction"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.String())
	}
	if got := stockOf(t, st, sale); got != 0 {
		t.Fatalf("stock = %d, want 0", got)
	}
}
