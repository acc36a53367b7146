package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/workflows"
)

// probeStarter records the probe workflows it was asked to start; failing
// makes every start fail.
type probeStarter struct {
	mu      sync.Mutex
	started map[string]int
	failing bool
}

func (p *probeStarter) Start(context.Context, workflows.OrderInput) (bool, error) {
	return false, errors.New("no orders in this test")
}

func (p *probeStarter) StartProbe(_ context.Context, id string, _ time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failing {
		return errors.New("temporal said no")
	}
	p.started[id]++
	return nil
}

func (p *probeStarter) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.started)
}

// A probe's workflows are started by the relays that poll for its jobs,
// each exactly once across them, and each relay that took part is named;
// a relay's failure to start is reported; a job whose probe gave up is
// dropped.
func TestProbeJobsAreStartedOnceAcrossRelays(t *testing.T) {
	ctx := context.Background()
	st, rdb := newStock(t)
	a, b := &probeStarter{started: map[string]int{}}, &probeStarter{started: map[string]int{}}
	stopA := run(t, relay.New(st, a, relay.Options{Consumer: "relay-a"}))
	defer stopA()
	stopB := run(t, relay.New(st, b, relay.Options{Consumer: "relay-b"}))
	defer stopB()

	const n = 20 * relay.ProbeChunk
	if _, err := relay.RequestProbe(ctx, rdb, "r1", n, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := a.count() + b.count(); got < n {
			return fmt.Errorf("%d of %d probe workflows started", got, n)
		}
		// Each start is counted after it returns.
		if r, err := relay.ReadProbe(ctx, rdb, "r1"); err != nil || r.Started != n {
			return fmt.Errorf("the relays counted %d of %d starts (%v)", r.Started, n, err)
		}
		return nil
	})
	for i := range n {
		id := relay.ProbeID("r1", i)
		if a.started[id]+b.started[id] != 1 {
			t.Fatalf("%s started %d + %d times", id, a.started[id], b.started[id])
		}
	}
	report, err := relay.ReadProbe(ctx, rdb, "r1")
	if err != nil || len(report.Errors) != 0 || len(report.Relays) == 0 {
		t.Fatalf("report %+v, %v", report, err)
	}
	for _, name := range report.Relays {
		if name != "relay-a" && name != "relay-b" {
			t.Fatalf("report names relay %q", name)
		}
	}

	// A probe that gave up: the relays pop its job and drop it, nothing
	// starts (checked below, once a later job has been started).
	if _, err := relay.RequestProbe(ctx, rdb, "r2", relay.ProbeChunk, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if left, err := rdb.LLen(ctx, "seckill:engine-probe:jobs").Result(); err != nil || left != 0 {
			return fmt.Errorf("%d probe jobs not taken yet (%v)", left, err)
		}
		return nil
	})
	// A failing start is reported under the probe's run.
	a.mu.Lock()
	a.failing = true
	a.mu.Unlock()
	stopB()
	if _, err := relay.RequestProbe(ctx, rdb, "r3", 1, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		r, err := relay.ReadProbe(ctx, rdb, "r3")
		if err != nil || len(r.Errors) == 0 {
			return fmt.Errorf("no error reported yet (%v)", err)
		}
		if !strings.Contains(r.Errors[0], "relay-a") || !strings.Contains(r.Errors[0], "temporal said no") {
			return fmt.Errorf("error %q names neither the relay nor the cause", r.Errors[0])
		}
		return nil
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.started {
		if strings.HasPrefix(id, relay.ProbePrefix("r2")) {
			t.Fatalf("%s of a probe that gave up was started", id)
		}
	}
	for id := range a.started {
		if strings.HasPrefix(id, relay.ProbePrefix("r2")) {
			t.Fatalf("%s of a probe that gave up was started", id)
		}
	}
}

// A probe that gives up withdraws the jobs no relay has taken, and the
// jobs of a probe that died without withdrawing them are replaced by the
// next probe's (only the holder of the probe lock queues jobs): a relay
// that starts later finds only the live probe's.
func TestProbeJobsLeftBehindAreNotStarted(t *testing.T) {
	ctx := context.Background()
	st, rdb := newStock(t)
	withdraw, err := relay.RequestProbe(ctx, rdb, "given-up", 5*relay.ProbeChunk, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	withdraw()
	if left, err := rdb.LLen(ctx, "seckill:engine-probe:jobs").Result(); err != nil || left != 0 {
		t.Fatalf("%d probe jobs left after the withdrawal (%v)", left, err)
	}
	if _, err := relay.RequestProbe(ctx, rdb, "dead", 3*relay.ProbeChunk, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Relays take the oldest first, so a job of the dead probe left
	// behind would be taken before the live one's.
	if _, err := relay.RequestProbe(ctx, rdb, "other", 1, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if left, err := rdb.LLen(ctx, "seckill:engine-probe:jobs").Result(); err != nil || left != 1 {
		t.Fatalf("%d probe jobs left (%v), want only the other probe's", left, err)
	}
	p := &probeStarter{started: map[string]int{}}
	run(t, relay.New(st, p, relay.Options{Consumer: "late"}))
	testenv.Eventually(t, 30*time.Second, func() error {
		if p.count() < 1 {
			return errors.New("the other probe's workflow has not started")
		}
		return nil
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.started) != 1 || p.started[relay.ProbeID("other", 0)] != 1 {
		t.Fatalf("started %v, want only the other probe's one workflow", p.started)
	}
}
