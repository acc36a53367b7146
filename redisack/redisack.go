// Package redisack makes a Redis write count only once a replica holds it
// (docs/design.md §3.13). Redis replicates asynchronously: a primary that
// answered a script may die before any replica has it, and Sentinel then
// promotes a replica without it. WAIT, sent on the connection that ran the
// write, blocks until that many replicas have acknowledged every write of
// the connection so far, or a timeout passes. Policy.Run sends the script
// and the WAIT in one pipeline, so they share a connection and a round trip.
//
// Neither is ever sent twice by the client. go-redis resends a command or a
// pipeline whose reply it could not read (a dropped connection, a read
// timeout): for a script that would run it again, and for a WAIT it would
// ask whichever server the client names by then, perhaps a new primary
// that never had the write. Every command here is marked not to be resent,
// so a reply that is not read comes back as an error, and the caller
// decides what the buyer is told (docs/design.md §3.13).
package redisack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Policy is how many replicas must acknowledge a write, and how long to
// wait for them. The zero Policy asks for none: Run is the script alone.
type Policy struct {
	// Replicas is the number of replicas that must have the write; 0: none.
	Replicas int
	// Timeout bounds the wait for them. Default 1s.
	Timeout time.Duration
	// Observe, if set, is told how long each acknowledged run waited for
	// its replicas, and whether they confirmed it.
	Observe func(wait time.Duration, confirmed bool)
	// Fence, if set, must hold for a write to be sent and, once its
	// replicas confirmed it, to count (fence.go): a write it stops
	// before sending fails with ErrFenced, one it stops after comes back
	// with a *NotAcknowledgedError.
	Fence *Fence
}

// DefaultTimeout is the wait for replicas when Policy.Timeout is 0.
const DefaultTimeout = time.Second

// On reports whether the policy asks replicas for anything.
func (p Policy) On() bool { return p.Replicas > 0 }

// NotAcknowledgedError means the write ran on the primary but fewer replicas
// than asked confirmed it in time: it may be lost in a failover, or not.
// The script's reply is still returned beside it.
type NotAcknowledgedError struct {
	Want, Got int
	// Fenced: the replicas confirmed it, but by then the Sentinels no
	// longer confirmed the primary (Policy.Fence): Why says why.
	Fenced bool
	Why    string
}

func (e *NotAcknowledgedError) Error() string {
	if e.Fenced {
		return "redis: the replicas acknowledged the write, but the Sentinels no longer confirm this primary (fence): " + e.Why
	}
	return fmt.Sprintf("redis: %d of %d replicas acknowledged the write in time", e.Got, e.Want)
}

// IsFenced reports whether the fence stopped a write: it was not sent
// (ErrFenced), or its acknowledgement did not count.
func IsFenced(err error) bool {
	var na *NotAcknowledgedError
	return errors.Is(err, ErrFenced) || errors.As(err, &na) && na.Fenced
}

// IsNotAcknowledged reports whether err is a *NotAcknowledgedError.
func IsNotAcknowledged(err error) bool {
	var na *NotAcknowledgedError
	return errors.As(err, &na)
}

// Run runs script once and, when the policy asks for replicas, WAITs for
// them on the same connection. It returns the script's reply and error; a
// reply that replicas did not confirm comes with a *NotAcknowledgedError.
// A script that failed is not waited for. A reply that was not read (the
// connection dropped, the read timed out) is an error and is not resent:
// the script may have run.
func (p Policy) Run(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	if err := p.Closed(); err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd, err
	}
	cmd, err := p.run(ctx, rdb, script, keys, args)
	if isNoScript(cmd.Err()) {
		// The primary has not seen the script (a restart, a failover), so
		// it did not run: load it and go again.
		if lerr := script.Load(ctx, rdb).Err(); lerr != nil {
			return cmd, lerr
		}
		cmd, err = p.run(ctx, rdb, script, keys, args)
	}
	if cmd.Err() != nil {
		return cmd, cmd.Err()
	}
	return cmd, err
}

// run sends EVALSHA, and WAIT in the same pipeline when the policy asks
// for replicas. It returns the script's command, and nil, a
// *NotAcknowledgedError or the WAIT's own error. A script that failed is
// not waited for.
func (p Policy) run(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys []string, args []any) (*redis.Cmd, error) {
	evalsha := make([]any, 0, 3+len(keys)+len(args))
	evalsha = append(evalsha, "evalsha", script.Hash(), len(keys))
	for _, k := range keys {
		evalsha = append(evalsha, k)
	}
	cmd := redis.NewCmd(ctx, append(evalsha, args...)...)
	if !p.On() {
		_ = rdb.Process(ctx, once{cmd}) // the outcome is cmd's
		return cmd, nil
	}
	pipe := rdb.Pipeline()
	_ = pipe.Process(ctx, once{cmd}) // queues it
	wait := p.queueWait(ctx, pipe)
	began := time.Now()
	_, _ = pipe.Exec(ctx) // each command's outcome is read here and by the caller
	if cmd.Err() != nil {
		return cmd, nil
	}
	return cmd, p.outcome(wait, began)
}

// once is a command go-redis must not send again when it could not read
// the reply: the server may have run it (see the package comment).
type once struct{ *redis.Cmd }

func (once) NoRetry() bool { return true }

// onceInt is once for an integer reply.
type onceInt struct{ *redis.IntCmd }

func (onceInt) NoRetry() bool { return true }

// queueWait adds the WAIT to pipe, marked not to be resent: a pipeline
// holding it is never sent again as a whole.
func (p Policy) queueWait(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	wait := redis.NewIntCmd(ctx, "wait", p.Replicas, p.timeout().Milliseconds())
	_ = pipe.Process(ctx, onceInt{wait}) // queues it
	return wait
}

// Closed is ErrFenced, with the reason, when the policy's fence does not
// hold; nil otherwise. A read whose answer must rest on surviving state
// asks it too.
func (p Policy) Closed() error {
	if !p.On() || p.Fence == nil || p.Fence.Holds() {
		return nil
	}
	return p.Fence.fenced()
}

func (p Policy) timeout() time.Duration { return orDefault(p.Timeout, DefaultTimeout) }

// readMargin is what a pipeline's reply read needs beyond the WAIT: the
// script's run and the round trip.
const readMargin = 500 * time.Millisecond

// Fits reports whether the policy's WAIT fits in the reply read of a
// client with readTimeout (go-redis's Options.ReadTimeout: 0 is its
// default, 5 s in v9.23, a negative value no deadline). A pipeline's replies are
// read under the client's read timeout, not the WAIT's: a wait longer
// than that would end every slow acknowledgement in a read timeout, whose
// outcome nobody knows, rather than in an answer.
func (p Policy) Fits(readTimeout time.Duration) error {
	if !p.On() || readTimeout < 0 {
		return nil
	}
	if readTimeout == 0 {
		readTimeout = 5 * time.Second
	}
	if p.timeout()+readMargin > readTimeout {
		return fmt.Errorf("the wait for replicas (%v) must be at least %v under the Redis read timeout (%v): "+
			"shorten it, or raise the read timeout (read_timeout in a redis:// URL)", p.timeout(), readMargin, readTimeout)
	}
	return nil
}

// outcome reads the WAIT's answer: nil when enough replicas confirmed,
// a *NotAcknowledgedError when not, or the WAIT's own error.
func (p Policy) outcome(wait *redis.IntCmd, began time.Time) error {
	got, err := wait.Result()
	if err != nil {
		return fmt.Errorf("redis: WAIT for replicas: %w", err)
	}
	confirmed := int(got) >= p.Replicas
	// The fence is read after the WAIT: a write counts only if the
	// Sentinels still confirmed the primary when its replicas had it.
	fenced := confirmed && p.Closed() != nil
	if p.Observe != nil {
		p.Observe(time.Since(began), confirmed && !fenced)
	}
	switch {
	case !confirmed:
		return &NotAcknowledgedError{Want: p.Replicas, Got: int(got)}
	case fenced:
		return &NotAcknowledgedError{Want: p.Replicas, Got: int(got), Fenced: true, Why: p.Fence.Why()}
	}
	return nil
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// Pipeliner is what Exec sends its pipeline on: a client, whose pool
// picks the connection, or a *redis.Conn the caller holds.
type Pipeliner interface {
	Pipeline() redis.Pipeliner
}

// Exec sends the commands queue adds to a pipeline and, when the policy
// asks for replicas, a WAIT after them, on one connection and never twice
// (a reply not read is an error). It returns the first command error, or a
// *NotAcknowledgedError when replicas did not confirm them.
func (p Policy) Exec(ctx context.Context, rdb Pipeliner, queue func(redis.Pipeliner)) error {
	if err := p.Closed(); err != nil {
		return err
	}
	pipe := rdb.Pipeline()
	queue(pipe)
	var wait *redis.IntCmd
	if p.On() {
		wait = p.queueWait(ctx, pipe)
	}
	began := time.Now()
	cmds, _ := pipe.Exec(ctx)
	for _, c := range cmds {
		if c != redis.Cmder(onceInt{wait}) && c.Err() != nil {
			return c.Err()
		}
	}
	if wait == nil {
		return nil
	}
	return p.outcome(wait, began)
}

// Bound tells the operator, in a sentence, whether an acknowledged write
// can be lost to a partition on the primary the client names now, or ""
// when it cannot. WAIT only reports: a primary cut off from the Sentinels
// with k of its R replicas beside it goes on acknowledging while k is at
// least the policy's Replicas and at least its min-replicas-to-write; a
// failover on the other side then discards those writes. The worst case
// leaves one replica to promote (k = R-1), so a write is safe from that
// only when the policy or min-replicas-to-write asks for all R replicas,
// and then the primary refuses writes within min-replicas-max-lag seconds
// of losing one (docs/design.md §3.13, the guarantee per shape). Managed
// Redis often refuses CONFIG GET: the sentence then says so.
func (p Policy) Bound(ctx context.Context, rdb redis.UniversalClient) string {
	if !p.On() {
		return ""
	}
	cfg, err := rdb.ConfigGet(ctx, "min-replicas-*").Result()
	if err != nil {
		return fmt.Sprintf("cannot read the Redis primary's min-replicas-to-write (CONFIG GET: %v): "+
			"whether a primary cut off from the Sentinels with a replica can go on acknowledging writes is unknown (docs/design.md §3.13)", err)
	}
	info, err := rdb.InfoMap(ctx, "replication").Result()
	if err != nil {
		return fmt.Sprintf("cannot read the Redis primary's replicas (INFO replication: %v)", err)
	}
	replicas, _ := strconv.Atoi(info["Replication"]["connected_slaves"])
	minWrite, _ := strconv.Atoi(cfg["min-replicas-to-write"])
	if replicas-1 < max(p.Replicas, minWrite) {
		return ""
	}
	shape := fmt.Sprintf("the Redis primary has %d replicas, min-replicas-to-write %d, and writes wait for %d: cut off from the Sentinels with %d of them, it ",
		replicas, minWrite, p.Replicas, replicas-1)
	if p.Fence != nil {
		return fmt.Sprintf("%sacknowledges purchases a failover loses for at most %v, until the fence stops it; "+
			"set min-replicas-to-write %d with a short min-replicas-max-lag to lose none, at the cost of admission while a replica is down (docs/design.md §3.13)",
			shape, p.Fence.Bound(), replicas)
	}
	return fmt.Sprintf("%sgoes on acknowledging purchases a failover loses; give every process the Sentinels (a Sentinel URL, or --admit-fence) "+
		"so the fence bounds that, set min-replicas-to-write %d with a short min-replicas-max-lag, or wait for %d replicas (docs/design.md §3.13)",
		shape, replicas, replicas)
}
