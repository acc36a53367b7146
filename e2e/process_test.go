// Package e2e drives the built seckill binary as a user and an operator
// would: the README tour against `seckill dev`, and against `seckill serve`
// + `seckill worker` as separate processes on real Postgres, Redis and
// Temporal.
package e2e

import (
	"fmt"
	"os/exec"
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

// stack is the production shape against real services: Postgres, Redis
// and a Temporal server process, with the schema migrated; the test starts
// serve and worker processes with env.
type stack struct {
	env []string
	api string // the api's base URL, on SECKILL_HTTP_ADDR
}

func newStack(t *testing.T, extraEnv ...string) stack {
	t.Helper()
	_, db := testenv.Redis(t)
	tp := testenv.StartTemporal(t)
	port := testenv.FreePort(t)
	s := stack{api: fmt.Sprintf("http://127.0.0.1:%d", port), env: append([]string{
		"DATABASE_URL=" + testenv.DatabaseURL(t),
		"REDIS_ADDR=" + testenv.RedisURL(testenv.RedisAddr(t), db),
		"TEMPORAL_ADDRESS=" + tp.Address(),
		"SECKILL_JWT_SECRET=" + secret,
		"SECKILL_HTTP_ADDR=" + fmt.Sprintf("127.0.0.1:%d", port),
		"SECKILL_METRICS_ADDR=127.0.0.1:0",
	}, extraEnv...)}
	s.seckill(t, "migrate")
	return s
}

// seckill runs a one-shot command of the binary against the stack and
// returns what it printed.
func (s stack) seckill(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = append(cmd.Environ(), s.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("seckill %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
