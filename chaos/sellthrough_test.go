package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/bench"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testenv"
)

// Selling through a failover in the shipped shape (docker-compose.yml):
// two replicas, min-replicas-to-write 1 with a lag of at most 2 s, every
// process on --admit-ack=replica, and buyers who, told 503, come back
// after the Retry-After the answer gave with the same Idempotency-Key, as
// `seckill bench --retry-unavailable` plays them.

// patientWave is a wave of buyers who retry their 503s.
type patientWave struct {
	mu       sync.Mutex
	began    time.Time
	won      map[string]string // user -> order id, from a 202
	soldOut  int
	gaveUp   map[string]int // the 503s the buyers who gave up were left with, by code
	other    map[string]int // answers neither final nor 503
	answers  map[string]int // 503 answers by code
	retries  int
	first503 time.Duration // after began
	last503  time.Duration
}

// buyPatiently has every shopper buy, 16 requests in flight; a 503 sends
// the shopper back, after its Retry-After (a second if none) and up to a
// quarter more, with the same key, unless that is later than patience
// after the wave began. After each 202, won is called with the number of
// 202s so far.
func buyPatiently(sale string, shoppers []shopper, patience time.Duration, won func(n int)) *patientWave {
	w := &patientWave{began: time.Now(), won: map[string]string{}, gaveUp: map[string]int{},
		other: map[string]int{}, answers: map[string]int{}}
	inFlight := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, s := range shoppers {
		wg.Go(func() {
			for try := 0; ; try++ {
				inFlight <- struct{}{}
				p, err := s.c.Purchase(context.Background(), sale, s.key)
				at := time.Since(w.began)
				<-inFlight
				var refusal *client.Error
				w.mu.Lock()
				if try > 0 {
					w.retries++
				}
				switch {
				case err == nil:
					w.won[s.user] = p.OrderID
					n := len(w.won)
					w.mu.Unlock()
					if won != nil {
						won(n)
					}
					return
				case errors.As(err, &refusal) && refusal.Problem.Code == wire.CodeSoldOut:
					w.soldOut++
					w.mu.Unlock()
					return
				case errors.As(err, &refusal) && refusal.StatusCode == http.StatusServiceUnavailable:
					if len(w.answers) == 0 || at < w.first503 {
						w.first503 = at
					}
					w.last503 = max(w.last503, at)
					w.answers[refusal.Problem.Code]++
				default:
					w.other[fmt.Sprint(err)]++
					w.mu.Unlock()
					return
				}
				wait := max(refusal.RetryAfter, time.Second)
				wait += rand.N(wait/4 + 1)
				if at+wait > patience {
					w.gaveUp[refusal.Problem.Code]++
					w.mu.Unlock()
					return
				}
				w.mu.Unlock()
				time.Sleep(wait) // the buyer waiting as the answer asked, not a synchronisation
			}
		})
	}
	wg.Wait()
	return w
}

// The primary is SIGKILLed once a third of the units are sold and is not
// brought back: Sentinel promotes a replica, the other one follows it, so
// the new primary has a replica to confirm purchases at once. The 503
// answers last no longer than Sentinel's down-after plus 2 s, and every
// unit is sold to a buyer who kept retrying; every 202 has its order.
func TestTwoReplicasSellThroughAPrimaryKill(t *testing.T) {
	t.Parallel()
	sellThroughAPrimaryKill(t, 2)
}

func sellThroughAPrimaryKill(t *testing.T, replicas int) {
	h := testenv.StartRedisHAWith(t, testenv.RedisHAOptions{Replicas: replicas, MinReplicasToWrite: 1, MinReplicasMaxLag: 2})
	c := start(t, setup{redisAddr: h.URL(0), env: []string{"SECKILL_ADMIT_ACK=replica", "SECKILL_ADMIT_ACK_TIMEOUT=500ms"}})
	c.startWorker("worker")
	api := c.apis[0]
	sale := c.createSale(api, units)
	shoppers := c.shoppers(api, "patient", buyers)
	first := h.Primary()
	switched := h.SwitchMaster()
	var (
		once   sync.Once
		killed time.Time
	)
	w := buyPatiently(sale, shoppers, 30*time.Second, func(n int) {
		if n >= units/3 {
			once.Do(func() {
				killed = time.Now()
				h.Server(first).Kill()
			})
		}
	})
	window := w.last503 - w.first503
	t.Logf("%d replicas: primary killed %.2f s into the wave, at %d × 202; 503 answers %v from %.2f s to %.2f s (%.2f s); %d retries; "+
		"%d × 202, %d sold out, gave up %v, other %v", replicas, killed.Sub(w.began).Seconds(), units/3, counts(w.answers),
		w.first503.Seconds(), w.last503.Seconds(), window.Seconds(), w.retries, len(w.won), w.soldOut, w.gaveUp, w.other)
	if len(w.other) > 0 {
		t.Fatalf("answers neither final nor 503: %v", w.other)
	}
	if len(w.answers) == 0 {
		t.Fatal("no purchase was answered 503: the kill did not fall in the wave")
	}
	// The window is the Sentinels' failover and what seckill adds after
	// it. Sentinel's own part varies: it waits for a quorum's votes (asked
	// every second), up to a second of random delay before a failover
	// starts, and its next INFO of the promoted replica (every second), so
	// it usually switches within down-after plus 1.5 s, not always.
	// seckill's part (following the switch, the fence confirming the new
	// primary) must be short, and the window within down-after plus 2 s
	// whenever Sentinel itself was on time.
	sw := (<-switched).Sub(w.began)
	t.Logf("the Sentinels announced the new primary %.2f s after the kill", (sw - killed.Sub(w.began)).Seconds())
	if after := w.last503 - sw; after > 500*time.Millisecond {
		t.Errorf("503 answers went on %.2f s after the Sentinels announced the new primary", after.Seconds())
	}
	if bound := h.DownAfter + 2*time.Second; window > bound {
		if sentinel := sw - killed.Sub(w.began); sentinel <= h.DownAfter+1500*time.Millisecond {
			t.Errorf("503 answers for %.2f s, beyond Sentinel's down-after plus 2 s (%.2f s)", window.Seconds(), bound.Seconds())
		} else {
			t.Logf("503 answers for %.2f s, beyond down-after plus 2 s: the Sentinels themselves took %.2f s to switch", window.Seconds(), sentinel.Seconds())
		}
	}
	if len(w.won) != units || len(w.gaveUp) > 0 {
		t.Fatalf("%d of %d units sold; buyers gave up on %v", len(w.won), units, w.gaveUp)
	}
	c.waitFor(api, "every order written", func(st bench.Stats) bool { return st.Orders["AWAITING_PAYMENT"] == units })
	written := time.Since(w.began)
	p := &purchases{won: w.won}
	p.payAll(t, shoppers)
	out := c.auditQuiescent(sale)
	record(fmt.Sprintf("Redis primary SIGKILLed in the wave (a third sold), %d replicas with min-replicas-to-write 1, --admit-ack=replica", replicas),
		fmt.Sprintf("a replica was promoted and the other followed it; 503 answers for %.1f s (down-after %.1f s), %v; the buyers retried them "+
			"as Retry-After asked with their Idempotency-Key (%d retries) and every unit was sold", window.Seconds(), h.DownAfter.Seconds(), counts(w.answers), w.retries),
		bench.Result{Accepted: len(w.won), Paid: len(w.won), CreatedSeconds: written.Seconds(), Lost: paidByID(len(w.won))}, out)
}

// counts renders answers by code as "111 UNAVAILABLE, 16 UNCONFIRMED".
func counts(by map[string]int) string {
	codes := make([]string, 0, len(by))
	for c := range by {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%d %s", by[c], c)
	}
	return strings.Join(parts, ", ")
}
