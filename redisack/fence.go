package redisack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Fence bounds how long a primary cut off from the Sentinels can go on
// acknowledging writes (docs/design.md §3.13, "The fence"). WAIT only
// counts replicas: a primary partitioned with one of them keeps satisfying
// it while the Sentinels, on the other side, promote a replica that has
// none of those writes. Sentinel decides by its own quorum, so the
// question "will my write survive?" is theirs to answer, and the fence
// asks them: every Every, each Sentinel is asked for the primary it
// monitors (SENTINEL MASTER), and the fence holds for Lease from the
// check's start when a majority of them name the server this process
// writes to (by run id, which no proxy, NAT or announced address
// changes), do not think it down, and heard it answer a ping at most
// Silence before they replied.
//
// So a write acknowledged while the fence holds was acknowledged at most
// Lease after a check that began at most Silence after a majority last
// reached the primary: at most Lease+Silence after a partition began. A
// primary cut off from the Sentinels acknowledges for that long at most,
// whatever its replicas do, and a process cut off from them (or one that
// still writes to a demoted primary's address) stops at once its lease
// runs out. That span is the bound the guarantee table states.
type Fence struct {
	// Every is how often the Sentinels are asked; default 250 ms.
	Every time.Duration
	// Lease is how long a check's confirmation lasts; default 1 s.
	Lease time.Duration
	// Silence is the longest a Sentinel may have gone without a ping
	// reply from the primary for its word to count; default 1.5 s.
	// Sentinel pings every second (or every down-after-milliseconds, if
	// that is shorter), so it must exceed that period.
	Silence time.Duration
	// OnChange, if set, is told each time the fence opens or closes.
	OnChange func(holds bool, why string)

	primary   redis.UniversalClient
	master    string
	sentinels []sentinel

	start time.Time    // the monotonic base of until
	until atomic.Int64 // the fence holds while time.Since(start) < until (ns); 0: it does not
	mu    sync.Mutex
	held  bool   // as last reported to OnChange
	why   string // why it does not hold, when it does not
}

// Fence defaults.
const (
	DefaultFenceEvery   = 250 * time.Millisecond
	DefaultFenceLease   = time.Second
	DefaultFenceSilence = 1500 * time.Millisecond
)

// NewFence is a fence for writes to primary, checked against the
// Sentinels at sentinels (host:port), which monitor it as master. opts
// are the Sentinels' connection options (password, TLS); Addr is set per
// Sentinel. It does not hold until a check has passed: call Check, or Run.
func NewFence(primary redis.UniversalClient, master string, sentinels []string, opts redis.Options) *Fence {
	f := &Fence{primary: primary, master: master, start: time.Now(), why: "not checked yet"}
	for _, addr := range sentinels {
		o := opts
		o.Addr = addr
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
		o.MaxRetries = -1 // a late answer is a stale one: ask again next round
		f.sentinels = append(f.sentinels, sentinel{addr, redis.NewSentinelClient(&o)})
	}
	return f
}

// Close closes the Sentinel connections.
func (f *Fence) Close() {
	for _, s := range f.sentinels {
		s.c.Close()
	}
}

// Holds reports whether a write acknowledged now counts.
func (f *Fence) Holds() bool {
	return f != nil && int64(time.Since(f.start)) < f.until.Load()
}

// Why says why the fence does not hold ("" when it does).
func (f *Fence) Why() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held && f.Holds() {
		return ""
	}
	if f.held {
		return "the last confirmation by the Sentinels is older than the lease"
	}
	return f.why
}

// Run checks every Every until ctx ends.
func (f *Fence) Run(ctx context.Context) {
	t := time.NewTicker(f.every())
	defer t.Stop()
	for {
		_ = f.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check asks the Sentinels once: the fence holds for Lease from the
// check's start if a majority confirms the primary, and stops holding at
// once if not (the error says why). Checks must not overlap: Run makes
// them one after another.
func (f *Fence) Check(ctx context.Context) error {
	began := time.Since(f.start)
	ctx, cancel := context.WithTimeout(ctx, f.lease())
	defer cancel()
	err := f.confirm(ctx)
	if err == nil {
		f.until.Store(int64(began + f.lease()))
	} else {
		// No majority vouches for the primary now: the lease of an
		// earlier check does not outlive that answer.
		f.until.Store(0)
	}
	f.report(err)
	return err
}

// report tells OnChange when the fence has opened or closed since the
// last check.
func (f *Fence) report(err error) {
	holds := err == nil && f.Holds()
	f.mu.Lock()
	changed := holds != f.held
	f.held = holds
	if err != nil {
		f.why = err.Error()
	}
	why := f.why
	f.mu.Unlock()
	if changed && f.OnChange != nil {
		if holds {
			why = ""
		}
		f.OnChange(holds, why)
	}
}

// confirm returns nil when a majority of the Sentinels name the server
// the primary client reaches, think it up, and heard from it within
// Silence.
func (f *Fence) confirm(ctx context.Context) error {
	info, err := f.primary.InfoMap(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("cannot read the primary's run id: %w", err)
	}
	runID := info["Server"]["run_id"]
	if runID == "" {
		return errors.New("the primary's INFO server has no run_id")
	}
	type verdict struct{ err error }
	answers := make(chan verdict, len(f.sentinels))
	for _, s := range f.sentinels {
		go func() { answers <- verdict{f.vouch(ctx, s, runID)} }()
	}
	need := len(f.sentinels)/2 + 1
	var yes int
	var refusals []string
	for range f.sentinels {
		v := <-answers
		if v.err == nil {
			yes++
			continue
		}
		refusals = append(refusals, v.err.Error())
	}
	if yes >= need {
		return nil
	}
	return fmt.Errorf("%d of %d Sentinels confirm this primary, %d needed: %s", yes, len(f.sentinels), need, strings.Join(refusals, "; "))
}

// vouch returns nil when Sentinel s names runID as the master, thinks it
// up, and had a ping reply from it within Silence.
func (f *Fence) vouch(ctx context.Context, s sentinel, runID string) error {
	m, err := s.c.Master(ctx, f.master).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: %v", s.addr, err)
	}
	if m["runid"] != runID {
		return fmt.Errorf("sentinel %s names %s:%s (run id %s) as the primary", s.addr, m["ip"], m["port"], m["runid"])
	}
	for _, flag := range strings.Split(m["flags"], ",") {
		if flag == "s_down" || flag == "o_down" || flag == "disconnected" {
			return fmt.Errorf("sentinel %s thinks the primary is %s", s.addr, flag)
		}
	}
	ms, err := strconv.ParseInt(m["last-ok-ping-reply"], 10, 64)
	if err != nil {
		return fmt.Errorf("sentinel %s: last-ok-ping-reply %q", s.addr, m["last-ok-ping-reply"])
	}
	if silent := time.Duration(ms) * time.Millisecond; silent > f.silence() {
		return fmt.Errorf("sentinel %s last heard the primary %v ago", s.addr, silent)
	}
	return nil
}

// sentinel is one Sentinel the fence asks, with its address for the
// reasons it gives.
type sentinel struct {
	addr string
	c    *redis.SentinelClient
}

func (f *Fence) every() time.Duration   { return orDefault(f.Every, DefaultFenceEvery) }
func (f *Fence) lease() time.Duration   { return orDefault(f.Lease, DefaultFenceLease) }
func (f *Fence) silence() time.Duration { return orDefault(f.Silence, DefaultFenceSilence) }

// Bound is how long after a partition from the Sentinels begins a write
// can still be acknowledged: Lease+Silence.
func (f *Fence) Bound() time.Duration { return f.lease() + f.silence() }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// ErrFenced means a write was not sent because the fence does not hold:
// the Sentinels do not confirm, now, the primary this process writes to.
// Nothing changed.
var ErrFenced = errors.New("redis: the Sentinels do not confirm this primary now (fence): nothing was written")

// fenced is ErrFenced with the fence's reason.
func (f *Fence) fenced() error {
	return fmt.Errorf("%w: %s", ErrFenced, f.Why())
}
