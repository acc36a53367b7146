// Package testenv gives tests the real services they run against: a fresh
// Postgres database, a clean Redis database and a Temporal dev server of
// their own.
//
// The services come from the environment that .ci/run sets up:
//
//	SECKILL_TEST_DATABASE_URL  postgres:// URL of a server the tests may create databases on
//	SECKILL_TEST_REDIS_ADDR    host:port of a Redis whose databases 1 and up the tests lease and flush
//	                           (every database but 0, which holds the leases: up to 1,023 with
//	                           --databases 1024, as .ci/run starts it; see Redis)
//	SECKILL_BIN                a seckill binary (plain build) whose `temporal` command runs the dev
//	                           server; unset, the tests build one on first use (see Binary)
//	STRIPE_MOCK_URL            base URL of a stripe-mock of StripeMockVersion; unset, the tests build and
//	                           start one on first use (see StripeMockURL)
//	SECKILL_REQUIRE_SERVICES=1 a missing service fails the test instead of skipping it (CI sets it)
package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/store"
)

// missing skips the test, or fails it when services are required.
func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("SECKILL_REQUIRE_SERVICES") == "1" {
		t.Fatalf("%s is required (SECKILL_REQUIRE_SERVICES=1) but not configured; run the tests through .ci/run", what)
	}
	t.Skipf("%s not configured; run the tests through .ci/run", what)
}

var dbSeq atomic.Int64

// DatabaseURL creates an empty database for the test and returns its URL.
// The database is dropped when the test ends.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	base, name := testDatabase(t, "seckill_test")
	admin, err := sql.Open("postgres", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
	})
	return withDatabase(t, base, name)
}

// testDatabase returns the test server's URL and a database name of the
// test's own, starting with prefix.
func testDatabase(t testing.TB, prefix string) (base, name string) {
	t.Helper()
	base = os.Getenv("SECKILL_TEST_DATABASE_URL")
	if base == "" {
		missing(t, "Postgres (SECKILL_TEST_DATABASE_URL)")
	}
	return base, fmt.Sprintf("%s_%d_%d_%d", prefix, os.Getpid(), time.Now().UnixNano()%1_000_000, dbSeq.Add(1))
}

// withDatabase is base with its database replaced by name.
func withDatabase(t testing.TB, base, name string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// TemporalDatabaseURL returns the URL of a Postgres database that does
// not exist yet, for a Temporal server to create with its visibility
// twin (name_visibility); both are dropped when the test ends.
func TemporalDatabaseURL(t testing.TB) string {
	t.Helper()
	base, name := testDatabase(t, "temporal_test")
	t.Cleanup(func() {
		admin, err := sql.Open("postgres", base)
		if err != nil {
			return
		}
		defer admin.Close()
		for _, db := range []string{name, name + "_visibility"} {
			_, _ = admin.Exec("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)")
		}
	})
	return withDatabase(t, base, name)
}

// Store opens a migrated store on a fresh database.
func Store(t testing.TB) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// RedisAddr returns the address of the test Redis.
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("SECKILL_TEST_REDIS_ADDR")
	if addr == "" {
		missing(t, "Redis (SECKILL_TEST_REDIS_ADDR)")
	}
	return addr
}

// Redis returns a client on a Redis database no other running test uses,
// flushed before the test. Each test leases its database with a key in
// database 0 (SET NX, released when the test ends, expiring after the CI's
// timeout if its process dies), so a long test (the chaos suite's run for
// minutes) never has its database handed to, and flushed by, another. The
// server needs a database per concurrently running test: .ci/run starts it
// with --databases 1024.
func Redis(t testing.TB) (*redis.Client, int) {
	t.Helper()
	addr := RedisAddr(t)
	ctx := context.Background()
	ctl := redis.NewClient(&redis.Options{Addr: addr})
	defer ctl.Close()
	count := 16
	if cfg, err := ctl.ConfigGet(ctx, "databases").Result(); err == nil {
		if n, err := strconv.Atoi(cfg["databases"]); err == nil && n > 1 {
			count = n
		}
	}
	// Start where the last lease left off, so databases are reused as late
	// as possible.
	next, err := ctl.Incr(ctx, "seckill:test:db").Result()
	if err != nil {
		t.Fatalf("redis at %s: %v", addr, err)
	}
	db, lease := 0, ""
	for i := range count - 1 {
		candidate := int((next+int64(i))%int64(count-1)) + 1
		key := fmt.Sprintf("seckill:test:lease:%d", candidate)
		ok, err := ctl.SetNX(ctx, key, fmt.Sprintf("%d %s", os.Getpid(), t.Name()), 30*time.Minute).Result()
		if err != nil {
			t.Fatalf("redis at %s: %v", addr, err)
		}
		if ok {
			db, lease = candidate, key
			break
		}
	}
	if db == 0 {
		t.Fatalf("no free database on the Redis at %s: all %d are leased by running tests; start redis-server with --databases 1024", addr, count-1)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, DB: db, PoolSize: 64})
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rdb.Close()
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		_ = c.Del(context.Background(), lease).Err()
	})
	return rdb, db
}

// RedisURL is the redis:// URL of database db on the test Redis.
func RedisURL(addr string, db int) string {
	return fmt.Sprintf("redis://%s/%d", strings.TrimPrefix(addr, "redis://"), db)
}

// Eventually polls cond every interval until it returns nil or timeout
// passes, then fails the test with cond's last error. It waits for a state,
// not for a guessed duration.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	interval := 20 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached within %s: %v", timeout, err)
		}
		time.Sleep(interval)
		interval = min(interval*2, 500*time.Millisecond)
	}
}

// HeldSnapshots names the Postgres sessions of st's database, other than
// the one asking, that sit in a transaction or hold a snapshot (an xmin
// vacuum must respect) while running nothing; "" if none, and always on
// SQLite.
func HeldSnapshots(t testing.TB, st *store.Store) string {
	t.Helper()
	if _, ok := st.DB().Driver().(*pq.Driver); !ok {
		return ""
	}
	var held string
	err := st.DB().QueryRowContext(context.Background(), `
		SELECT coalesce(string_agg(format('pid %s (%s, xmin %s)', pid, state, coalesce(backend_xmin::text, 'none')), ', '), '')
		FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
		  AND state <> 'active' AND (state LIKE 'idle in transaction%' OR backend_xmin IS NOT NULL)`).Scan(&held)
	if err != nil {
		t.Fatal(err)
	}
	return held
}
