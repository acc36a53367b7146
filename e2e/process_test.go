// Package e2e drives the built seckill binary as a user and an operator
// would: the README tour against `seckill dev`, and against `seckill serve`
// + `seckill worker` as separate processes on real Postgres, Redis and
// Temporal.
package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

var (
	run       = testenv.Run
	waitReady = testenv.WaitHTTP
)

type proc = testenv.Process

// exported finds `export NAME=value` in what a process printed.
func exported(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "export "+name+"="); ok {
			return v
		}
	}
	return ""
}

// stack is testenv's production shape with the api's address chosen; the
// test starts serve and worker processes with env.
type stack struct {
	*testenv.Stack
	env []string // Stack.Env, the environment of every process
	api string   // the api's base URL, on SECKILL_HTTP_ADDR
}

func newStack(t *testing.T, extraEnv ...string) stack {
	t.Helper()
	return newStackWith(t, testenv.StackOptions{Env: extraEnv})
}

// newStackWith is newStack with the stack's options (o.Env is added to the
// api's address).
func newStackWith(t *testing.T, o testenv.StackOptions) stack {
	t.Helper()
	port := testenv.FreePort(t)
	o.Env = append([]string{
		fmt.Sprintf("SECKILL_HTTP_ADDR=127.0.0.1:%d", port),
		"SECKILL_METRICS_ADDR=127.0.0.1:0",
		// Where the worker reaches the built-in provider, for a stack
		// started with payEnv.
		fmt.Sprintf("SECKILL_BUILTINPAY_URL=http://127.0.0.1:%d/pay/", port),
	}, o.Env...)
	st := testenv.NewStack(t, secret, o)
	return stack{Stack: st, env: st.Env, api: fmt.Sprintf("http://127.0.0.1:%d", port)}
}

// payEnv makes a stack's orders pay at the built-in provider, as seckill
// dev's do: the api serves it under /pay/, the worker calls it there.
var payEnv = []string{
	"SECKILL_PAYMENT_PROVIDER=builtin",
	"SECKILL_BUILTINPAY_SECRET_KEY=e2e-pay-secret-key",
	"SECKILL_BUILTINPAY_WEBHOOK_SECRET=e2e-pay-webhook-secret",
}

// seckill runs a one-shot command of the binary against the stack.
func (s stack) seckill(t *testing.T, args ...string) string {
	t.Helper()
	return s.Seckill(t, args...)
}

// scratchDB leases a Redis database of its own for the scratch sales of a
// bench's ceiling and HTTP limit (--ceiling-db), so that they never land
// in a database another test's relay reads.
func scratchDB(t *testing.T) int {
	t.Helper()
	_, db := testenv.Redis(t)
	return db
}
