package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/store"
)

// A wave leaves more buyers admitted ahead of their sagas than one insert
// can carry parameters for (65,535 in Postgres): the reconciler's memory
// records them all.
func TestRememberAdmissionsOfAWholeWave(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		sale := newSale(t, st, 20000)
		first := orderid.FirstAt(time.Now())
		buyers := make([]store.Buyer, 17000)
		for i := range buyers {
			buyers[i] = store.Buyer{UserID: fmt.Sprintf("buyer-%d", i), OrderID: first + int64(i)}
		}
		if err := st.RememberAdmissions(ctx, sale, buyers, false); err != nil {
			t.Fatal(err)
		}
		got, err := st.UnplacedAdmissions(ctx, sale)
		if err != nil || len(got) != len(buyers) {
			t.Fatalf("remembered %d (%v), want %d", len(got), err, len(buyers))
		}
	})
}
