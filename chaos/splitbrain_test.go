package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/bench"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/redisack"
)

// (i) Split brain, in the shipped shape (a primary, two replicas,
// min-replicas-to-write 1, three Sentinels): the primary and one replica
// are cut off from the Sentinels and from the other replica, which the
// Sentinels promote, while an api and a worker still configured with the
// old primary's address (fenced with the Sentinels, --admit-fence) go on
// reaching it; an api and a worker on the Sentinel URL follow the
// promotion. Then the partition heals and the Sentinels demote the old
// primary, discarding what it took meanwhile.
//
// WAIT alone would let the old primary acknowledge every purchase of the
// partition (its replica beside it answers), all of them lost
// (docs/design.md §3.13). With the fence: no purchase sent to it later
// than the fence's bound after the cut is answered 202, the 202s lost are
// no more than the stale api gave after the cut, each is named by `seckill
// audit` with its buyer, every other 202 has its order, every buyer's
// final answer is true, and nothing is oversold.
func TestSplitBrainLosesNoMoreThanTheFenceAllows(t *testing.T) {
	t.Parallel()
	began := time.Now()
	sb := testenv.StartSplitBrain(t)
	stale := []string{"REDIS_ADDR=" + sb.PrimaryURL(0), "SECKILL_ADMIT_FENCE=" + sb.URL(0)}
	c := start(t, setup{redisAddr: sb.URL(0), env: []string{"SECKILL_ADMIT_ACK=replica", "SECKILL_ADMIT_ACK_TIMEOUT=500ms"},
		apiEnv: [][]string{nil, stale}})
	c.startWorker("worker")
	c.startWorkerWith("stale-worker", stale)
	good, old := c.apis[0], c.apis[1]
	const stock = 3000 // more than the test sells: a sold-out answer would hide the fence's
	sale := c.createSale(good, stock)

	b := newBrain(c, sale)
	stop := b.buy(map[string]string{"good": good, "stale": old}, 4, 40*time.Millisecond)
	b.await(t, "purchases on both sides before the cut", func() bool {
		return b.count("good", time.Time{}, true) >= 20 && b.count("stale", time.Time{}, true) >= 20
	})

	t.Logf("%v: the wave is on", time.Since(began))
	sb.Partition()
	cut := time.Now()
	b.mark(&b.cut, cut)
	sb.AwaitPromotion(time.Minute)
	t.Logf("%v: the Sentinels promoted Across %v after the cut", time.Since(began), time.Since(cut))
	b.await(t, "the stale api's answers after the promotion", func() bool { return b.count("stale", cut.Add(fenceBound+time.Second), false) >= 20 })
	sb.Heal()
	t.Logf("%v: healed", time.Since(began))
	sb.AwaitDemotion(time.Minute)
	healed := time.Now()
	t.Logf("%v: the old primary is Across's replica", time.Since(began))
	b.mark(&b.healed, healed)
	b.await(t, "202s on the Sentinel URL after the heal", func() bool { return b.count("good", healed, true) >= 20 })
	stop()

	t.Logf("before the retries: %s", b.summary())
	b.settle(t, good)
	t.Logf("%v: every buyer has a final answer", time.Since(began))
	rep := c.auditSettled(sale)
	t.Logf("%v: audited", time.Since(began))

	// Every 202 is an order, or lost and named; the stale api's late 202s
	// are none.
	named := map[string]string{}
	for _, l := range rep.Lost {
		named[fmt.Sprint(l.OrderID)] = l.UserID
	}
	var lookups []brainAnswer
	final := b.finals()
	for _, a := range b.answers {
		if a.code == "" || a.code == wire.CodeUnconfirmed && a.order != "" && final[a.user] != a.order {
			lookups = append(lookups, a)
		}
	}
	found := lookUp(c, good, lookups)
	var lost, late, staleAfterCut int
	for _, a := range b.answers {
		if a.code != "" {
			continue
		}
		if a.api == "stale" && a.answered.After(cut) {
			staleAfterCut++
		}
		if a.api == "stale" && a.sent.After(cut.Add(fenceBound)) {
			late++
			t.Errorf("%s was answered 202 (order %s) by the fenced api %v after the cut, past the fence's bound %v",
				a.user, a.order, a.sent.Sub(cut), fenceBound)
		}
		o, err := found[a.order].order, found[a.order].err
		switch {
		case isStatus(err, http.StatusNotFound):
			lost++
			if named[a.order] != a.user {
				t.Errorf("%s's 202 for order %s is lost and not named by the audit (it names %v); sent %v after the cut, answered %v after; %s",
					a.user, a.order, named, a.sent.Sub(cut), a.answered.Sub(cut), explainUnnamed(c, a.order))
			}
		case err != nil:
			t.Errorf("%s's order %s: %v", a.user, a.order, err)
		case o.Status != domain.StatusAwaitingPayment:
			t.Errorf("%s's order %s is %s, want AWAITING_PAYMENT (a 202 that did not hold)", a.user, a.order, o.Status)
		}
	}
	for _, a := range b.answers {
		if a.code != wire.CodeUnconfirmed || a.order == "" || final[a.user] == a.order {
			continue
		}
		// The buyer was told they might hold a.order, and their retry
		// answered another: a.order must not exist.
		if o, err := found[a.order].order, found[a.order].err; !isStatus(err, http.StatusNotFound) {
			t.Errorf("%s was told UNCONFIRMED for order %s, then 202 for %s; the first exists too: %+v %v", a.user, a.order, final[a.user], o, err)
		}
	}
	if lost > staleAfterCut {
		t.Errorf("%d 202s lost, more than the %d the fenced api gave after the cut", lost, staleAfterCut)
	}
	if len(rep.Lost) != lost {
		t.Errorf("the audit names %d lost purchases, the buyers hold %d lost 202s: %v", len(rep.Lost), lost, rep.Lost)
		for _, l := range rep.Lost {
			for _, a := range b.answers {
				if a.user == l.UserID {
					t.Logf("%s was answered %q (order %s) by %s, sent %v after the cut", a.user, a.code, a.order, a.api, a.sent.Sub(cut))
				}
			}
		}
	}
	if rep.Oversold != 0 {
		t.Errorf("oversold %d", rep.Oversold)
	}
	t.Logf("split brain: %d answers; 202s: %d good, %d stale (%d of them after the cut); lost %d; answers by code %v",
		len(b.answers), b.won["good"], b.won["stale"], staleAfterCut, lost, b.codes())
	record("Split brain: the primary and one replica cut off from the Sentinels and the other replica for the failover, "+
		"an api and a worker still on the old primary's address (fenced), then healed",
		fmt.Sprintf("the fence stopped the old primary's 202s within %v of the cut; %d of its %d 202s after the cut lost, each named by the audit; "+
			"the orders are left awaiting payment and audited --settled (the row's wave and verdict columns say so by hand)",
			fenceBound, lost, staleAfterCut),
		bench.Result{Accepted: b.won["good"] + b.won["stale"], Lost: &bench.Lost{Checked: b.won["good"] + b.won["stale"], Lost: lost}},
		map[bool]string{true: "OK: every invariant holds", false: "violated"}[lost == 0 && rep.Oversold == 0])
}

// explainUnnamed says what the audit had to judge a lost 202 by: the
// admission remembered for its order (or none), and its workflow, if one
// was started.
func explainUnnamed(c *cluster, order string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	db, err := sql.Open("postgres", c.env("DATABASE_URL"))
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	var seen time.Time
	var replicated bool
	var lost sql.NullTime
	switch err := db.QueryRowContext(ctx, `SELECT seen_at, replicated, lost_at FROM admissions WHERE id = $1`, order).Scan(&seen, &replicated, &lost); {
	case errors.Is(err, sql.ErrNoRows):
		b.WriteString("no admission remembered")
	case err != nil:
		fmt.Fprintf(&b, "admission: %v", err)
	default:
		fmt.Fprintf(&b, "admission remembered at %s (replicated %v, lost at %v)", seen.UTC().Format(time.StampMilli), replicated, lost)
	}
	id, _ := strconv.ParseInt(order, 10, 64)
	d, err := c.Temporal.Client().DescribeWorkflowExecution(ctx, domain.WorkflowID(id), "")
	var missing *serviceerror.NotFound
	switch {
	case errors.As(err, &missing):
		b.WriteString("; no workflow")
	case err != nil:
		fmt.Fprintf(&b, "; describe the workflow: %v", err)
	default:
		info := d.GetWorkflowExecutionInfo()
		fmt.Fprintf(&b, "; workflow %s started %s, %d history events", info.GetStatus(),
			info.GetStartTime().AsTime().UTC().Format(time.StampMilli), info.GetHistoryLength())
		for _, pa := range d.GetPendingActivities() {
			fmt.Fprintf(&b, "; pending activity %s, attempt %d, last failure %q", pa.GetActivityType().GetName(), pa.GetAttempt(), pa.GetLastFailure().GetMessage())
		}
		if wt := d.GetPendingWorkflowTask(); wt != nil {
			fmt.Fprintf(&b, "; pending workflow task %s, attempt %d", wt.GetState(), wt.GetAttempt())
		}
		it := c.Temporal.Client().GetWorkflowHistory(ctx, domain.WorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var events []string
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				events = append(events, err.Error())
				break
			}
			events = append(events, e.GetEventTime().AsTime().UTC().Format(time.StampMilli)+" "+e.GetEventType().String())
		}
		fmt.Fprintf(&b, "; history: %s", strings.Join(events, ", "))
	}
	return b.String()
}

// lookedUp is an order as its buyer reads it.
type lookedUp struct {
	order wire.Order
	err   error
}

// lookUp reads the order of each answer as its buyer, on api, 16 at a
// time.
func lookUp(c *cluster, api string, answers []brainAnswer) map[string]lookedUp {
	var mu sync.Mutex
	out := make(map[string]lookedUp, len(answers))
	next := make(chan brainAnswer)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for a := range next {
				o, err := shopperOf(c, api, a.user).c.Order(context.Background(), a.order)
				mu.Lock()
				out[a.order] = lookedUp{o, err}
				mu.Unlock()
			}
		})
	}
	for _, a := range answers {
		next <- a
	}
	close(next)
	wg.Wait()
	return out
}

// fenceBound is the fence's bound with the defaults every process runs.
var fenceBound = (&redisack.Fence{}).Bound()

// brain is the purchases of the split-brain test: one purchase per buyer,
// each answer with the api that gave it and when.
type brain struct {
	c    *cluster
	sale string

	mu          sync.Mutex
	cut, healed time.Time // when the partition began and healed
	answers     []brainAnswer
	won         map[string]int // 202s by api name
	unsure      map[string]string
	n           int
}

type brainAnswer struct {
	api, user, order, code string
	sent, answered         time.Time
}

func newBrain(c *cluster, sale string) *brain {
	return &brain{c: c, sale: sale, won: map[string]int{}, unsure: map[string]string{}}
}

// shopperOf is user's shopper on api, with the Idempotency-Key of their
// one purchase (the same on every api).
func shopperOf(c *cluster, api, user string) shopper {
	signer, err := auth.NewSigner(secret)
	if err != nil {
		c.t.Fatal(err)
	}
	tok, _ := signer.Mint(user, auth.RoleBuyer, time.Hour)
	return shopper{user: user, key: "key-" + user, c: client.New(api, tok, nil)}
}

// buy has perAPI buyers at a time buy on each api, a new buyer each
// purchase, at most every pace on each api (so the sale outlasts the
// test), until the returned stop is called.
func (b *brain) buy(apis map[string]string, perAPI int, pace time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for name, url := range apis {
		tick := time.NewTicker(pace)
		wg.Go(func() { <-done; tick.Stop() })
		for range perAPI {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					case <-tick.C:
					}
					b.mu.Lock()
					b.n++
					user := fmt.Sprintf("%s-%d", name, b.n)
					b.mu.Unlock()
					sent := time.Now()
					a := shopperOf(b.c, url, user).buy(b.sale)
					b.note(brainAnswer{api: name, user: user, order: a.order, code: a.code, sent: sent, answered: time.Now()})
				}
			})
		}
	}
	return func() { close(done); wg.Wait() }
}

func (b *brain) mark(field *time.Time, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	*field = at
}

func (b *brain) note(a brainAnswer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answers = append(b.answers, a)
	switch a.code {
	case "":
		b.won[a.api]++
		delete(b.unsure, a.user)
	case wire.CodeSoldOut:
		delete(b.unsure, a.user)
	default:
		b.unsure[a.user] = a.api
	}
}

// finals are the order ids of each buyer's final 202.
func (b *brain) finals() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for _, a := range b.answers {
		if a.code == "" {
			out[a.user] = a.order
		}
	}
	return out
}

// count counts the answers api gave to purchases sent after t (202s
// only, if won).
func (b *brain) count(api string, t time.Time, won bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, a := range b.answers {
		if a.api == api && a.sent.After(t) && (!won || a.code == "") {
			n++
		}
	}
	return n
}

// label is an answer's status: "202", or the problem's code.
func (a brainAnswer) label() string {
	if a.code == "" {
		return "202"
	}
	return a.code
}

// summary counts the answers by api and code before the cut, during the
// partition and after the heal.
func (b *brain) summary() string {
	b.mu.Lock()
	cut, healed := b.cut, b.healed
	defer b.mu.Unlock()
	phases := map[string]map[string]int{}
	for _, a := range b.answers {
		phase := "before"
		switch {
		case !healed.IsZero() && a.sent.After(healed):
			phase = "healed"
		case !cut.IsZero() && a.sent.After(cut):
			phase = "cut"
		}
		key := phase + "/" + a.api
		if phases[key] == nil {
			phases[key] = map[string]int{}
		}
		phases[key][a.label()]++
	}
	return fmt.Sprint(phases)
}

func (b *brain) codes() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for _, a := range b.answers {
		out[a.label()]++
	}
	return out
}

func (b *brain) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func() error {
		if !cond() {
			return fmt.Errorf("waiting for %s: answers %s", what, b.summary())
		}
		return nil
	})
}

// settle retries every buyer without a final answer, with their
// Idempotency-Key, on api (16 at a time), until each has one; the final
// answers join the others.
func (b *brain) settle(t *testing.T, api string) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func() error {
		b.mu.Lock()
		users := make([]string, 0, len(b.unsure))
		for u := range b.unsure {
			users = append(users, u)
		}
		b.mu.Unlock()
		next := make(chan string)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for u := range next {
					sent := time.Now()
					a := shopperOf(b.c, api, u).buy(b.sale)
					b.note(brainAnswer{api: "retry", user: u, order: a.order, code: a.code, sent: sent, answered: time.Now()})
				}
			})
		}
		for _, u := range users {
			next <- u
		}
		close(next)
		wg.Wait()
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.unsure) > 0 {
			return fmt.Errorf("%d buyers without a final answer", len(b.unsure))
		}
		return nil
	})
}

// auditSettled runs `seckill audit --settled --json` for the sale until it
// finds no violation but lost purchases (every order on its way has its
// row, and Redis agrees with the database), and returns its report.
func (c *cluster) auditSettled(sale string) audit.Report {
	c.t.Helper()
	var rep audit.Report
	testenv.Eventually(c.t, 2*time.Minute, func() error {
		cmd := exec.Command(testenv.Binary(c.t), "audit", "--sale", sale, "--settled", "--json")
		cmd.Env = append(cmd.Environ(), c.Env...)
		out, _ := cmd.Output()
		var reps []audit.Report
		if err := json.Unmarshal(out, &reps); err != nil || len(reps) != 1 {
			return fmt.Errorf("audit: %v: %s", err, out)
		}
		rep = reps[0]
		for _, v := range rep.Violations {
			if !strings.Contains(v, "accepted purchases lost") {
				return fmt.Errorf("audit: %s", v)
			}
		}
		return nil
	})
	return rep
}
