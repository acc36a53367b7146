// Package redisack makes a Redis write count only once a replica holds it
// (docs/design.md §3.13). Redis replicates asynchronously: a primary that
// answered a script may die before any replica has it, and Sentinel then
// promotes a replica without it. WAIT, sent on the connection that ran the
// write, blocks until that many replicas have acknowledged every write of
// the connection so far, or a timeout passes. Policy.Run sends the script
// and the WAIT in one pipeline, so they share a connection and a round trip.
package redisack

import (
	"context"
	"errors"
	"fmt"
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
}

func (e *NotAcknowledgedError) Error() string {
	return fmt.Sprintf("redis: %d of %d replicas acknowledged the write in time", e.Got, e.Want)
}

// IsNotAcknowledged reports whether err is a *NotAcknowledgedError.
func IsNotAcknowledged(err error) bool {
	var na *NotAcknowledgedError
	return errors.As(err, &na)
}

// Run runs script and, when the policy asks for replicas, WAITs for them on
// the same connection. It returns the script's reply and error; a reply
// that replicas did not confirm comes with a *NotAcknowledgedError. A
// script that failed is not waited for.
func (p Policy) Run(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	if !p.On() {
		cmd := script.Run(ctx, rdb, keys, args...)
		return cmd, cmd.Err()
	}
	cmd, err := p.pipeline(ctx, rdb, script, keys, args)
	if isNoScript(cmd.Err()) {
		// The primary has not seen the script (a restart, a failover):
		// load it and go again.
		if lerr := script.Load(ctx, rdb).Err(); lerr != nil {
			return cmd, lerr
		}
		cmd, err = p.pipeline(ctx, rdb, script, keys, args)
	}
	if cmd.Err() != nil {
		return cmd, cmd.Err()
	}
	return cmd, err
}

// pipeline sends EVALSHA and WAIT together. It returns the script's
// command, and nil, a *NotAcknowledgedError or the WAIT's own error. A
// script that failed is not waited for.
func (p Policy) pipeline(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys []string, args []any) (*redis.Cmd, error) {
	pipe := rdb.Pipeline()
	cmd := script.EvalSha(ctx, pipe, keys, args...)
	wait := p.queueWait(ctx, pipe)
	began := time.Now()
	_, _ = pipe.Exec(ctx) // each command's outcome is read here and by the caller
	if cmd.Err() != nil {
		return cmd, nil
	}
	return cmd, p.outcome(wait, began)
}

// queueWait adds the WAIT to pipe. WAIT is among go-redis's commands,
// though not in the Pipeliner interface; the pipeline has it, with the
// read deadline the wait needs.
func (p Policy) queueWait(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return pipe.(interface {
		Wait(context.Context, int, time.Duration) *redis.IntCmd
	}).Wait(ctx, p.Replicas, timeout)
}

// outcome reads the WAIT's answer: nil when enough replicas confirmed,
// a *NotAcknowledgedError when not, or the WAIT's own error.
func (p Policy) outcome(wait *redis.IntCmd, began time.Time) error {
	got, err := wait.Result()
	if err != nil {
		return fmt.Errorf("redis: WAIT for replicas: %w", err)
	}
	confirmed := int(got) >= p.Replicas
	if p.Observe != nil {
		p.Observe(time.Since(began), confirmed)
	}
	if !confirmed {
		return &NotAcknowledgedError{Want: p.Replicas, Got: int(got)}
	}
	return nil
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// Exec sends the commands queue adds to a pipeline and, when the policy
// asks for replicas, a WAIT after them. It returns the first command error,
// or a *NotAcknowledgedError when replicas did not confirm them.
func (p Policy) Exec(ctx context.Context, rdb redis.UniversalClient, queue func(redis.Pipeliner)) error {
	pipe := rdb.Pipeline()
	queue(pipe)
	var wait *redis.IntCmd
	if p.On() {
		wait = p.queueWait(ctx, pipe)
	}
	began := time.Now()
	cmds, _ := pipe.Exec(ctx)
	for _, c := range cmds {
		if c != redis.Cmder(wait) && c.Err() != nil {
			return c.Err()
		}
	}
	if wait == nil {
		return nil
	}
	return p.outcome(wait, began)
}
