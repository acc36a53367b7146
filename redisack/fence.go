package redisack

import (
	"context"
	"errors"
	"fmt"
	"net"
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
// Silence before they replied. Right after a failover the Sentinels that
// did not lead it still name the old primary, under an older
// configuration epoch, for up to two seconds: those are not counted
// against the new one (decide).
//
// So a write acknowledged while the fence holds was acknowledged at most
// Lease after a check that began at most Silence after the Sentinels of
// the newest configuration last reached the primary: at most
// Lease+Silence after a partition began. (A primary a failover replaced
// is named by the older configuration only, so the exception never holds
// it.) A primary cut off from the Sentinels acknowledges for that long at
// most, whatever its replicas do, and a process cut off from them (or one
// that still writes to a demoted primary's address) stops at once its
// lease runs out. That span is the bound the guarantee table states.
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

// Run checks every Every until ctx ends; while the fence does not hold,
// every 50 ms, so that writes resume as soon as a failover's new primary
// is confirmed.
func (f *Fence) Run(ctx context.Context) {
	for {
		next := f.every()
		if f.Check(ctx) != nil {
			next = closedEvery
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// closedEvery is how often a fence that does not hold checks;
// primaryTimeout bounds a check's read of the primary.
const (
	closedEvery    = 50 * time.Millisecond
	primaryTimeout = 150 * time.Millisecond
)

// Check asks the Sentinels once: the fence holds for Lease from the
// check's start if a majority confirms the primary, and stops holding at
// once if the Sentinels say otherwise (the error says why). Checks must
// not overlap: Run makes them one after another.
func (f *Fence) Check(ctx context.Context) error {
	began := time.Since(f.start)
	ctx, cancel := context.WithTimeout(ctx, f.lease())
	defer cancel()
	err := f.confirm(ctx)
	var refused *refusedError
	switch {
	case err == nil:
		f.until.Store(int64(began + f.lease()))
	case errors.As(err, &refused):
		// The Sentinels answered, and not for this primary: the lease of
		// an earlier check does not outlive that answer. (A check that
		// could not read the primary lets the lease run out: the write it
		// guards cannot reach that primary either.)
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
	// The run id, and the address this connection reached (laddr), from
	// one connection: the server they describe is the one written to.
	// Briefly: while a failover is under way the client retries a dead
	// primary with backoff, and the check after the switch should not wait
	// for those retries.
	pctx, cancel := context.WithTimeout(ctx, primaryTimeout)
	defer cancel()
	var info *redis.InfoCmd
	var client *redis.ClientInfoCmd
	_, err := f.primary.Pipelined(pctx, func(p redis.Pipeliner) error {
		info, client = p.InfoMap(pctx, "server"), p.ClientInfo(pctx)
		return nil
	})
	if err != nil && info.Err() != nil {
		return fmt.Errorf("cannot read the primary's run id: %w", info.Err())
	}
	self := server{runID: info.Val()["Server"]["run_id"]}
	if ci, cerr := client.Result(); cerr == nil && ci != nil {
		self.addr = ci.LAddr // managed Redis may refuse CLIENT INFO: the run id alone then
	}
	if self.runID == "" {
		return errors.New("the primary's INFO server has no run_id")
	}
	verdicts := make(chan verdict, len(f.sentinels))
	for _, s := range f.sentinels {
		go func() { verdicts <- f.vouch(ctx, s, self) }()
	}
	var all []verdict
	for range f.sentinels {
		all = append(all, <-verdicts)
	}
	return decide(all, len(f.sentinels)/2+1)
}

// verdict is one Sentinel's answer: whether it vouches for the server
// written to (err nil), and the configuration epoch of the primary it
// names (-1: it did not answer).
type verdict struct {
	Epoch int64
	Err   error
}

// decide holds the fence when need Sentinels (a majority) vouch, or when
// a majority answered, at least one vouches, and every one that does not
// names an older configuration (a lower epoch) than all that do: after a
// failover the Sentinels that did not lead it learn the new primary from
// the others' hello messages, up to two seconds later, and until then
// they still name the old one. Sentinels that name the same configuration
// and do not vouch (they cannot reach the primary, think it down, or
// name another) keep the fence closed.
func decide(all []verdict, need int) error {
	var yes, answered int
	lowest := int64(-1) // the lowest epoch among those that vouch
	var refusals []string
	for _, v := range all {
		if v.Epoch >= 0 {
			answered++
		}
		if v.Err == nil {
			yes++
			if lowest < 0 || v.Epoch < lowest {
				lowest = v.Epoch
			}
			continue
		}
		refusals = append(refusals, v.Err.Error())
	}
	if yes >= need {
		return nil
	}
	behind := yes > 0 && answered >= need
	for _, v := range all {
		if v.Err != nil && v.Epoch >= 0 && v.Epoch >= lowest {
			behind = false
		}
	}
	if behind {
		return nil
	}
	return &refusedError{fmt.Sprintf("%d of %d Sentinels confirm this primary, %d needed: %s", yes, len(all), need, strings.Join(refusals, "; "))}
}

// refusedError is the Sentinels' answer that they do not confirm the
// primary.
type refusedError struct{ why string }

func (e *refusedError) Error() string { return e.why }

// server is the server written to, as the fence knows it.
type server struct {
	runID string
	addr  string // host:port this process's connection reached; "" if unknown
}

// vouch returns nil when Sentinel s names self as the master, thinks it
// up, and had a ping reply from it within Silence. A Sentinel names a
// server by run id, which no proxy, NAT or announced address changes; for
// a moment after a failover it knows the promoted server's address but
// not yet its run id (it learns it from the server's INFO, which it asks
// for every few seconds), and then its address must be the one this
// process's connection reached.
func (f *Fence) vouch(ctx context.Context, s sentinel, self server) verdict {
	m, err := s.c.Master(ctx, f.master).Result()
	if err != nil {
		return verdict{-1, fmt.Errorf("sentinel %s: %v", s.addr, err)}
	}
	epoch, err := strconv.ParseInt(m["config-epoch"], 10, 64)
	if err != nil {
		return verdict{-1, fmt.Errorf("sentinel %s: config-epoch %q", s.addr, m["config-epoch"])}
	}
	named := m["runid"] == self.runID ||
		m["runid"] == "" && self.addr != "" && net.JoinHostPort(m["ip"], m["port"]) == self.addr
	if !named {
		return verdict{epoch, fmt.Errorf("sentinel %s names %s:%s (run id %s, epoch %d) as the primary", s.addr, m["ip"], m["port"], m["runid"], epoch)}
	}
	for _, flag := range strings.Split(m["flags"], ",") {
		if flag == "s_down" || flag == "o_down" {
			return verdict{epoch, fmt.Errorf("sentinel %s thinks the primary is %s", s.addr, flag)}
		}
	}
	ms, err := strconv.ParseInt(m["last-ok-ping-reply"], 10, 64)
	if err != nil {
		return verdict{epoch, fmt.Errorf("sentinel %s: last-ok-ping-reply %q", s.addr, m["last-ok-ping-reply"])}
	}
	if silent := time.Duration(ms) * time.Millisecond; silent > f.silence() {
		return verdict{epoch, fmt.Errorf("sentinel %s last heard the primary %v ago", s.addr, silent)}
	}
	return verdict{epoch, nil}
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
