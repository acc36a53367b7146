package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/stock"
	"github.com/seckill/seckill/store"
)

// readsBench is the api over a database and a Redis whose every query and
// round trip it counts. Its background work is not run, so the counts are
// the requests' own.
type readsBench struct {
	t       *testing.T
	deps    api.Deps
	url     string // the first instance
	admin   string
	queries *atomic.Int64 // statements sent to Postgres
	trips   atomic.Int64  // round trips to Redis (a pipeline is one)
}

func startReadsBench(t *testing.T, cfg api.Config) *readsBench {
	t.Helper()
	b := &readsBench{t: t}
	db, queries := testenv.CountingDB(t, testenv.DatabaseURL(t))
	b.queries = queries
	st := store.OpenPostgresDB(db)
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	rdb, _ := testenv.Redis(t)
	rdb.AddHook(tripCounter{&b.trips})
	signer, err := auth.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := client.NewLazyClient(client.Options{HostPort: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))})
	if err != nil {
		t.Fatal(err)
	}
	b.deps = api.Deps{Store: st, Stock: stock.New(rdb, redsync.New(goredis.NewPool(rdb))), Temporal: tc, Signer: signer, IDs: orderid.New(3)}
	b.url = b.serve(cfg)
	if b.admin, err = signer.Mint("ops", auth.RoleAdmin, time.Hour); err != nil {
		t.Fatal(err)
	}
	return b
}

// serve starts another api instance over the same database and Redis and
// returns its URL.
func (b *readsBench) serve(cfg api.Config) string {
	hs := httptest.NewServer(api.New(cfg, b.deps).Handler())
	b.t.Cleanup(hs.Close)
	return hs.URL
}

// call sends a request and decodes a 2xx answer into out.
func (b *readsBench) call(method, path string, out any) {
	b.t.Helper()
	b.callAt(b.url, method, path, "", out)
}

// callAt is call on the instance at base, with a JSON body if not empty.
func (b *readsBench) callAt(base, method, path, body string, out any) {
	b.t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.admin)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b.t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			b.t.Fatal(err)
		}
	}
}

func (b *readsBench) createSale(name string) wire.Sale {
	b.t.Helper()
	body := fmt.Sprintf(`{"name":%q,"price_cents":100,"stock":50,"starts_at":%q,"ends_at":%q}`, name,
		time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano), time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano))
	req, _ := http.NewRequest("POST", b.url+"/v1/sales", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b.admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b.t.Fatalf("create sale: %d", resp.StatusCode)
	}
	var sl wire.Sale
	if err := json.NewDecoder(resp.Body).Decode(&sl); err != nil {
		b.t.Fatal(err)
	}
	return sl
}

// A refresh storm on a sale page at its opening reaches the database and
// Redis once per TTL at most, however many readers ask at once.
func TestSaleReadStormReachesTheDatabaseOnce(t *testing.T) {
	b := startReadsBench(t, api.Config{SaleCacheTTL: time.Minute, ShelfCacheTTL: time.Minute})
	sale := b.createSale("opening")
	b.queries.Store(0)
	b.trips.Store(0)

	const readers, reads = 32, 4
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range readers {
		wg.Go(func() {
			<-start
			for range reads {
				var got wire.Sale
				b.call("GET", "/v1/sales/"+sale.ID, &got)
				if got.State != "active" || got.Remaining != 50 {
					t.Errorf("read %+v, want an active sale with 50 left", got)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if q := b.queries.Load(); q > 1 {
		t.Errorf("%d reads sent %d queries to the database, want at most 1", readers*reads, q)
	}
	if n := b.trips.Load(); n > 1 {
		t.Errorf("%d reads made %d Redis round trips, want at most 1", readers*reads, n)
	}
}

// The sales list reads the live state of a whole page from Redis in one
// round trip, not one per sale.
func TestSalesListIsOneRedisRoundTrip(t *testing.T) {
	b := startReadsBench(t, api.Config{})
	const sales = 200
	for i := range sales {
		b.createSale(fmt.Sprintf("sale %d", i))
	}
	b.trips.Store(0)
	var page []wire.Sale
	b.call("GET", "/v1/sales?limit=200", &page)
	if len(page) != sales {
		t.Fatalf("page of %d sales, want %d", len(page), sales)
	}
	for _, sl := range page {
		if sl.State != "active" || sl.Remaining != 50 {
			t.Fatalf("listed %+v, want an active sale with 50 left", sl)
		}
	}
	if n := b.trips.Load(); n != 1 {
		t.Fatalf("GET /v1/sales?limit=200 made %d Redis round trips, want 1", n)
	}
}

// A copy of a sale never hides an operator's change beyond what
// docs/design.md §6.8 states: the instance that made the change reads it
// at once, and on another instance the remaining stock and the end follow
// within the shelf's TTL (100 ms), though its copy of the row is trusted
// for a minute here.
func TestSaleCopiesFollowOperators(t *testing.T) {
	b := startReadsBench(t, api.Config{SaleCacheTTL: time.Minute})
	other := b.serve(api.Config{SaleCacheTTL: time.Minute})
	read := func(base, id string) wire.Sale {
		t.Helper()
		var sl wire.Sale
		b.callAt(base, "GET", "/v1/sales/"+id, "", &sl)
		return sl
	}
	ended, cancelled := b.createSale("ended early"), b.createSale("cancelled")
	for _, id := range []string{ended.ID, cancelled.ID} {
		for _, base := range []string{b.url, other} {
			if sl := read(base, id); sl.State != "active" || sl.Stock != 50 {
				t.Fatalf("before the operator: %+v, want active with 50 units", sl)
			}
		}
	}

	b.callAt(b.url, "POST", "/v1/sales/"+ended.ID+"/units", `{"units":5}`, nil)
	if sl := read(b.url, ended.ID); sl.Stock != 55 || sl.Remaining != 55 {
		t.Errorf("after adding 5 units, the instance that added them reads %+v, want 55 units and 55 left", sl)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if sl := read(other, ended.ID); sl.Remaining != 55 {
			return fmt.Errorf("after adding 5 units, another instance reads %+v, want 55 left (from Redis)", sl)
		}
		return nil
	})

	b.call("POST", "/v1/sales/"+ended.ID+"/end", nil)
	b.call("POST", "/v1/sales/"+cancelled.ID+"/cancel", nil)
	for id, state := range map[string]string{ended.ID: "ended", cancelled.ID: "cancelled"} {
		if sl := read(b.url, id); sl.State != state || sl.EndsAt.After(time.Now()) {
			t.Errorf("after the operator, its own instance reads %+v, want %s with its end now", sl, state)
		}
	}
	// The other instance's copy of the row may be a minute old: Redis's
	// end says ended, and the cancellation shows once the copy expires.
	testenv.Eventually(t, 5*time.Second, func() error {
		for _, id := range []string{ended.ID, cancelled.ID} {
			if sl := read(other, id); !slices.Contains([]string{"ended", "cancelled"}, sl.State) || sl.EndsAt.After(time.Now()) {
				return fmt.Errorf("after the operator, another instance reads %+v, want it ended", sl)
			}
		}
		return nil
	})
}

// tripCounter counts the round trips of a go-redis client: a command or a
// pipeline each, but not the handshake of a new connection (HELLO, CLIENT
// SETINFO, SELECT), which depends on how many the pool opens.
type tripCounter struct{ n *atomic.Int64 }

func (tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !handshake(cmds[0]) {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

func handshake(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "select", "auth":
		return true
	}
	return false
}
