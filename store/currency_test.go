package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/store"
)

// A sale names its currency; migrate gives the sales made before sales had
// one the deployment's default, once, and leaves the others alone.
func TestSalesCurrencyAndItsBackfill(t *testing.T) {
	backends(t, func(t *testing.T, st *store.Store) {
		ctx := context.Background()
		eur, err := st.CreateSale(ctx, store.NewSale{Name: "eur", PriceCents: 100, Currency: "EUR", Stock: 1,
			StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)})
		if err != nil || eur.Currency != "EUR" {
			t.Fatalf("create in EUR: %+v %v", eur, err)
		}
		if _, err := st.CreateSale(ctx, store.NewSale{Name: "x", PriceCents: 100, Currency: "ABC", Stock: 1,
			StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)}); !errors.Is(err, domain.ErrInvalidOrder) {
			t.Fatalf("create in ABC: %v, want ErrInvalidOrder", err)
		}
		old := newSale(t, st, 1)
		// A row from before the column: its currency empty.
		if _, err := st.DB().ExecContext(ctx, `UPDATE sales SET currency = '' WHERE id = $1`, old); err != nil {
			t.Fatal(err)
		}
		if _, err := st.FillCurrency(ctx, "US"); err == nil {
			t.Fatal("FillCurrency took US for a currency")
		}
		if n, err := st.FillCurrency(ctx, "CNY"); err != nil || n != 1 {
			t.Fatalf("FillCurrency: %d %v, want the one sale without a currency", n, err)
		}
		if n, err := st.FillCurrency(ctx, "CNY"); err != nil || n != 0 {
			t.Fatalf("FillCurrency again: %d %v, want none", n, err)
		}
		for id, want := range map[int64]string{old: "CNY", eur.ID: "EUR"} {
			if sl, err := st.Sale(ctx, id); err != nil || sl.Currency != want {
				t.Fatalf("sale %d: %+v %v, want %s", id, sl, err, want)
			}
		}
	})
}
