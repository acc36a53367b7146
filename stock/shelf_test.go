package stock_test

import (
	"context"
	"testing"
	"time"
)

// Shelves reads each loaded sale's remaining stock and the end Redis
// holds, an operator's end included, and leaves out a sale not loaded.
func TestShelves(t *testing.T) {
	st, _ := newStock(t)
	ctx := context.Background()
	openSale(t, st, 1, 5)
	openSale(t, st, 2, 3)
	if _, err := st.Reserve(ctx, 2, "buyer", 20, ""); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if ok, err := st.End(ctx, 2, time.Now().Add(-time.Minute), time.Now()); err != nil || !ok {
		t.Fatalf("end: %v %v", ok, err)
	}
	shelves, err := st.Shelves(ctx, []int64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if sh := shelves[1]; !sh.Loaded || sh.Remaining != 5 || !sh.EndsAt.After(time.Now().Add(50*time.Minute)) {
		t.Errorf("sale 1: %+v, want 5 left, ending in an hour", sh)
	}
	if sh := shelves[2]; !sh.Loaded || sh.Remaining != 2 || sh.EndsAt.Before(before.Add(-time.Second)) || sh.EndsAt.After(time.Now()) {
		t.Errorf("sale 2: %+v, want 2 left, ended now", sh)
	}
	if sh, ok := shelves[3]; ok {
		t.Errorf("sale 3 is not loaded, read %+v", sh)
	}
	if shelves, err := st.Shelves(ctx, nil); err != nil || len(shelves) != 0 {
		t.Errorf("no sales: %v %v", shelves, err)
	}
}
