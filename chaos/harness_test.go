// Package chaos breaks a running seckill on purpose: real Postgres, Redis
// and Temporal, the api and the worker as separate processes of the built
// binary, a purchase wave from `seckill bench`, one fault injected in the
// middle of it, and the invariant audit at the end (docs/design.md §9).
//
// Each test appends a row to $SECKILL_RELIABILITY_REPORT if set; that is
// where docs/reliability.md's table comes from.
package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/lib/pq"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/bench"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment/builtin"
)

const secret = "chaos-secret-chaos-secret-chaos-secret"

// The wave: 1,000 buyers race for 250 units; half of the winners pay (on
// the built-in provider's hosted page), the other half cancel, so every
// workflow ends and the audit can require quiescence. (Half the example size keeps the suite within CI's
// time on two cores; the faults hit the same code paths.)
const (
	buyers = 1000
	units  = 250
)

type cluster struct {
	*testenv.Stack
	t     *testing.T
	apis  []string // base URLs
	mu    sync.Mutex
	procs map[string]*testenv.Process
}

// payEnv makes a cluster's orders pay at the built-in payment provider, as
// seckill dev's do: the buyers pay on its hosted page, and an order is PAID
// when the provider's notification of the capture reaches its workflow.
var payEnv = []string{
	"SECKILL_PAYMENT_PROVIDER=builtin",
	"SECKILL_BUILTINPAY_SECRET_KEY=chaos-pay-secret-key",
	"SECKILL_BUILTINPAY_WEBHOOK_SECRET=chaos-pay-webhook-secret",
}

type setup struct {
	databaseURL string   // default: a fresh test database
	redisAddr   string   // default: a test Redis database
	env         []string // more environment for every process
	apiEnv      [][]string
}

func start(t *testing.T, s setup) *cluster {
	t.Helper()
	st := testenv.NewStack(t, secret, testenv.StackOptions{DatabaseURL: s.databaseURL, RedisURL: s.redisAddr, Env: append([]string{
		"SECKILL_METRICS_ADDR=",
		"SECKILL_RELAY_MIN_IDLE=2s",
		"SECKILL_RECONCILE_INTERVAL=2s",
		"SECKILL_USER_RATE=100",
		"SECKILL_LOG_LEVEL=warn",
	}, append(payEnv, s.env...)...)})
	c := &cluster{Stack: st, t: t, procs: map[string]*testenv.Process{}}
	c.startProvider()
	if len(s.apiEnv) == 0 {
		s.apiEnv = [][]string{nil}
	}
	for _, extra := range s.apiEnv {
		c.startAPI(extra)
	}
	return c
}

// startProvider starts the api that is the built-in provider's home: the
// workers call its payment API, and the hosted pages it makes are on it.
// Every api serves the provider and sends its notifications (the
// provider's records are in Postgres); this one runs no relay and is
// killed by no test, so that a fault aimed at an api's relay leaves the
// payments where a shop's load balancer would.
func (c *cluster) startProvider() {
	c.t.Helper()
	port := testenv.FreePort(c.t)
	env := append(append([]string{}, c.Env...), fmt.Sprintf("SECKILL_HTTP_ADDR=127.0.0.1:%d", port), "SECKILL_RELAY=false")
	c.procs["provider-api"] = testenv.Run(c.t, "provider-api", env, "serve")
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	testenv.WaitHTTP(c.t, url+"/healthz", time.Minute)
	c.Env = append(c.Env, "SECKILL_BUILTINPAY_URL="+url+api.PayPrefix)
}

// startAPI starts one more api, api-N, with extra environment, and adds its
// base URL to c.apis once it answers.
func (c *cluster) startAPI(extra []string) string {
	c.t.Helper()
	port := testenv.FreePort(c.t)
	env := append(append([]string{}, c.Env...), fmt.Sprintf("SECKILL_HTTP_ADDR=127.0.0.1:%d", port))
	c.mu.Lock()
	name := fmt.Sprintf("api-%d", len(c.apis))
	c.procs[name] = testenv.Run(c.t, name, append(env, extra...), "serve")
	c.mu.Unlock()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	testenv.WaitHTTP(c.t, url+"/healthz", time.Minute)
	c.mu.Lock()
	c.apis = append(c.apis, url)
	c.mu.Unlock()
	return url
}

// payAtProvider pays order id as buyer: the pay, then the Pay button on the
// provider's hosted page its answer names. The order is PAID once the
// provider's notification of the capture reaches its workflow.
func payAtProvider(ctx context.Context, buyer *client.Client, id string) error {
	out, err := buyer.Pay(ctx, id)
	if err != nil {
		return err
	}
	p := out.Order.Payment
	if p == nil || p.RedirectURL == "" {
		return fmt.Errorf("the pay of order %s named no hosted page: %+v", id, out.Order)
	}
	status, _, err := builtin.PressButton(ctx, nil, p.RedirectURL, "pay")
	if err == nil && status != http.StatusSeeOther {
		err = fmt.Errorf("the hosted page of order %s answered the Pay button %d, want 303", id, status)
	}
	return err
}

// seckill runs a one-shot command.
func (c *cluster) seckill(args ...string) string {
	c.t.Helper()
	return c.Seckill(c.t, args...)
}

// startWorker starts (or restarts) the named worker process.
func (c *cluster) startWorker(name string) { c.startWorkerWith(name, nil) }

// startWorkerWith starts (or restarts) the named worker process with more
// environment, which overrides the stack's.
func (c *cluster) startWorkerWith(name string, extra []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs[name] = testenv.Run(c.t, name, append(append([]string{}, c.Env...), extra...), "worker")
}

func (c *cluster) kill(name string) {
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	p.Kill()
}

// wave runs `seckill bench` against api in the background. progress reports
// how many orders have rows so far (read from the sale's stats), so faults
// are injected on a state of the wave, not at a guessed time.
type wave struct {
	c      *cluster
	done   chan struct{}
	result bench.Result
	err    error
	out    string
}

func (c *cluster) wave(api string) *wave {
	w := &wave{c: c, done: make(chan struct{})}
	// The waves carry faults: the engine's ceiling (TEMPORAL_ADDRESS is in
	// c.Env) and Redis's limits are not what they are for. REDIS_ADDR is
	// too, so --redis-addr= keeps the bench's scratch sales out of Redis:
	// they would land in another test's database, or in a test Redis with
	// fewer databases than the number leased.
	cmd := exec.Command(testenv.Binary(c.t), "bench", "--target", api, "--users", fmt.Sprint(buyers),
		"--stock", fmt.Sprint(units), "--concurrency", "32", "--pay", "0.5", "--cancel", "0.5",
		"--start-delay", "1s", "--wait", "6m", "--engine-workflows", "0", "--redis-addr=", "--json")
	cmd.Env = append(cmd.Environ(), c.Env...)
	go func() {
		defer close(w.done)
		out, err := cmd.Output()
		w.out = string(out)
		if jerr := json.Unmarshal(out, &w.result); jerr != nil && err == nil {
			err = jerr
		}
		w.err = err
	}()
	return w
}

// saleStats reads the newest sale's stats from api.
func (c *cluster) saleStats(api string) (bench.Stats, string, error) {
	admin := strings.TrimSpace(c.seckill("token", "--user", "chaos-admin", "--role", "admin"))
	ctx := context.Background()
	sales, err := client.New(api, "", nil).Sales(ctx, 1)
	if err != nil || len(sales) == 0 {
		return bench.Stats{}, "", fmt.Errorf("no sale yet: %v", err)
	}
	st, err := client.New(api, admin, nil).Stats(ctx, sales[0].ID)
	return bench.Stats(st), sales[0].ID, err
}

// waitFor waits until cond holds on the wave's sale.
func (c *cluster) waitFor(api, what string, cond func(bench.Stats) bool) string {
	c.t.Helper()
	var sale string
	testenv.Eventually(c.t, 3*time.Minute, func() error {
		st, id, err := c.saleStats(api)
		if err != nil {
			return err
		}
		sale = id
		if !cond(st) {
			return fmt.Errorf("waiting for %s: %+v", what, st)
		}
		return nil
	})
	return sale
}

func created(st bench.Stats) int {
	n := 0
	for _, v := range st.Orders {
		n += v
	}
	return n
}

// finish waits for the wave, then audits the sale requiring quiescence, and
// records the outcome.
func (w *wave) finish(fault, behaviour string) {
	t := w.c.t
	t.Helper()
	<-w.done
	r := w.result
	t.Logf("wave: %d accepted, outcomes %v, all created %v after %.1fs, paid %d, cancelled %d",
		r.Accepted, r.Outcomes, r.AllCreated, r.CreatedSeconds, r.Paid, r.Cancelled)
	if w.err != nil || !r.InvariantsOK {
		t.Fatalf("the wave failed: %v %v\n%s", w.err, r.Violations, w.out)
	}
	if r.Accepted != units {
		t.Fatalf("%d orders accepted, want %d", r.Accepted, units)
	}
	record(fault, behaviour, r, w.c.auditQuiescent(r.SaleID))
}

// auditQuiescent waits until `seckill audit --quiescent` passes for the
// sale (the last workflows finish and the reconciler settles Redis) and
// returns its report.
func (c *cluster) auditQuiescent(sale string) string {
	c.t.Helper()
	var out string
	testenv.Eventually(c.t, 2*time.Minute, func() error {
		cmd := exec.Command(testenv.Binary(c.t), "audit", "--sale", sale, "--quiescent")
		cmd.Env = append(cmd.Environ(), c.Env...)
		b, err := cmd.CombinedOutput()
		out = string(b)
		if err != nil {
			return fmt.Errorf("%v: %s", err, b)
		}
		return nil
	})
	c.t.Logf("audit:\n%s", out)
	return out + c.checkMoney(sale)
}

// checkMoney: paid means a payment provider said so (docs/design.md
// §4.10). Once the provider has no payment of the sale pending and every
// notification of them is delivered, every PAID order of the sale names a
// capture at the provider that is its own, for the sale's price, and still
// kept; and every other capture of the sale's orders was refunded exactly
// once, under the shop's key. It answers a line for the report.
func (c *cluster) checkMoney(sale string) string {
	t := c.t
	t.Helper()
	db, err := sql.Open("postgres", c.env("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	testenv.Eventually(t, 2*time.Minute, func() error {
		var pending, undelivered int
		err := db.QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM builtinpay_payments WHERE sale_id = $1 AND state = 'pending'),
			(SELECT count(*) FROM builtinpay_events e JOIN builtinpay_payments p ON p.id = e.payment_id
			 WHERE p.sale_id = $1 AND e.delivered_at IS NULL)`, sale).Scan(&pending, &undelivered)
		if err == nil && pending+undelivered > 0 {
			err = fmt.Errorf("the provider has %d payments of sale %s pending and %d notifications undelivered", pending, sale, undelivered)
		}
		return err
	})
	var bad []string
	collect := func(query string) {
		rows, err := db.QueryContext(ctx, query, sale)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			bad = append(bad, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	collect(`SELECT format('order %s is PAID by payment %L, which is %s (order %s, %s of %s captured, the price %s)',
			o.id, o.payment_id, COALESCE(p.state, 'unknown to the provider'), p.order_id, p.captured_minor, p.amount_minor, s.price_cents)
		FROM orders o JOIN sales s ON s.id = o.sale_id LEFT JOIN builtinpay_payments p ON p.id = o.payment_id
		WHERE o.sale_id = $1 AND o.status = 'PAID' AND (p.id IS NULL OR p.order_id <> o.id OR p.state <> 'captured'
			OR p.captured_minor <> p.amount_minor OR p.amount_minor <> s.price_cents)`)
	collect(`SELECT format('payment %s of order %s (%s) was captured and refunded %s times, under %L', p.id, p.order_id,
			COALESCE(o.status, 'no order'), count(f.id), COALESCE(string_agg(f.idempotency_key, ','), ''))
		FROM builtinpay_payments p LEFT JOIN orders o ON o.id = p.order_id LEFT JOIN builtinpay_refunds f ON f.payment_id = p.id
		WHERE p.sale_id = $1 AND p.captured_at IS NOT NULL AND NOT (o.status IS NOT DISTINCT FROM 'PAID' AND o.payment_id = p.id)
		GROUP BY p.id, p.order_id, o.status
		HAVING count(f.id) <> 1 OR min(f.idempotency_key) <> 'refund-' || p.id`)
	if len(bad) > 0 {
		t.Fatalf("money kept or refunded wrong (%d):\n%s", len(bad), strings.Join(bad, "\n"))
	}
	var paid, refunded int
	if err := db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM orders WHERE sale_id = $1 AND status = 'PAID'),
		(SELECT count(*) FROM builtinpay_payments p JOIN builtinpay_refunds f ON f.payment_id = p.id WHERE p.sale_id = $1)`,
		sale).Scan(&paid, &refunded); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("money: %d PAID orders each kept its own capture; %d other captures refunded once\n", paid, refunded)
	t.Log(line)
	return line
}

// env is the value of the cluster's environment variable name.
func (c *cluster) env(name string) string {
	for _, kv := range slices.Backward(c.Env) {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	c.t.Fatalf("no %s in the cluster's environment", name)
	return ""
}

// paidByID is the lost-202 count of a test that paid every 202's order by
// its id, each pay failing the test if the order was not there: n checked,
// none lost.
func paidByID(n int) *bench.Lost { return &bench.Lost{Checked: n} }

func record(fault, behaviour string, r bench.Result, audit string) {
	path := os.Getenv("SECKILL_RELIABILITY_REPORT")
	if path == "" {
		return
	}
	// Lost is counted, not assumed: every 202 of the wave read back by its
	// order id (the bench's lost_202s), and the audit's own count from the
	// reconciler's memory of admissions (docs/design.md §3.14) besides.
	lost := "lost not checked"
	if r.Lost != nil {
		lost = fmt.Sprintf("lost %d of %d 202s", r.Lost.Lost, r.Lost.Checked)
	}
	money := ""
	if strings.Contains(audit, "money: ") {
		money = ", every capture kept by its PAID order or refunded once"
	}
	verdict := "clean (oversold 0, " + lost + ", leaked 0, no workflow running" + money + ")"
	if !strings.Contains(audit, "OK: every invariant holds") || r.Lost == nil || r.Lost.Lost > 0 {
		verdict = "VIOLATED (" + lost + ")"
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "| %s | %s | %d × 202, %d paid, %d cancelled; all orders written %.1f s after the wave (or the fault) began | %s |\n",
		fault, behaviour, r.Accepted, r.Paid, r.Cancelled, r.CreatedSeconds, verdict)
}
