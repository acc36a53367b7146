package stock_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/stock"
)

// A sale is live while it is on, or while its stream holds intents or
// entries read and not acknowledged; an ended, drained sale is not.
func TestLiveSales(t *testing.T) {
	st, rdb := newStock(t)
	ctx := context.Background()
	end := func(id int64) {
		t.Helper()
		if err := rdb.HSet(ctx, stock.KeysFor(id).Meta, "ends_ms", time.Now().Add(-time.Second).UnixMilli()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	reserve := func(id int64, user string) {
		t.Helper()
		if _, err := st.Reserve(ctx, id, user, id*1000+int64(len(user)), ""); err != nil {
			t.Fatal(err)
		}
	}
	group := func(id int64) string {
		t.Helper()
		key := stock.KeysFor(id).Intents
		if err := rdb.XGroupCreateMkStream(ctx, key, "relay", "0").Err(); err != nil {
			t.Fatal(err)
		}
		return key
	}

	openSale(t, st, 1, 5) // on, nothing admitted yet: live

	openSale(t, st, 2, 5) // ended, never had an intent: not live
	end(2)

	openSale(t, st, 3, 5) // ended with an intent not yet read: live
	reserve(3, "a")
	end(3)

	openSale(t, st, 4, 5) // ended, its intent read but not acknowledged: live
	reserve(4, "a")
	key := group(4)
	msgs, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "relay", Consumer: "c", Streams: []string{key, ">"}, Block: -1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	end(4)

	openSale(t, st, 5, 5) // ended, its intent deleted but not acknowledged: live
	reserve(5, "a")
	key = group(5)
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "relay", Consumer: "c", Streams: []string{key, ">"}, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XTrimMaxLen(ctx, key, 0).Err(); err != nil {
		t.Fatal(err)
	}
	end(5)

	openSale(t, st, 6, 5) // ended, started and acknowledged, like the relay leaves it: not live
	reserve(6, "a")
	key = group(6)
	read, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "relay", Consumer: "c", Streams: []string{key, ">"}, Block: -1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	id := read[0].Messages[0].ID
	if err := rdb.XAck(ctx, key, "relay", id).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XDel(ctx, key, id).Err(); err != nil {
		t.Fatal(err)
	}
	end(6)

	// Listed but its keys gone (retired meanwhile): not live.
	if err := rdb.SAdd(ctx, stock.SalesKey, strconv.Itoa(7)).Err(); err != nil {
		t.Fatal(err)
	}

	got, err := st.LiveSales(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1, 3, 4, 5}; !slices.Equal(got, want) {
		t.Fatalf("live sales = %v, want %v", got, want)
	}

	// Acknowledging sale 4's intent (and deleting it) retires it from the reads.
	if err := rdb.XAck(ctx, stock.KeysFor(4).Intents, "relay", msgs[0].Messages[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.XDel(ctx, stock.KeysFor(4).Intents, msgs[0].Messages[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err = st.LiveSales(ctx); err != nil || !slices.Equal(got, []int64{1, 3, 5}) {
		t.Fatalf("live sales after acknowledging = %v (%v), want [1 3 5]", got, err)
	}
}
