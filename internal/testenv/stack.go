package testenv

import (
	"os/exec"
	"strings"
	"testing"
)

// Stack is the production shape against real services, for tests that
// run the seckill binary as separate processes: a fresh Postgres database
// with the schema migrated, a leased Redis database and a Temporal server
// process of the test's own. Env configures every process started on it.
type Stack struct {
	Env      []string
	Temporal *Temporal
}

// StackOptions change what a Stack connects to.
type StackOptions struct {
	DatabaseURL string   // default: a fresh test database
	RedisURL    string   // default: a leased test Redis database
	Env         []string // more environment for every process
	// TemporalArgs are more arguments of the Temporal server process
	// (`seckill temporal`), e.g. a Postgres store.
	TemporalArgs []string
	// Temporal, if set, is a running server (or cluster) to use instead of
	// starting one.
	Temporal *Temporal
}

// NewStack starts Temporal, points the environment at the services and
// migrates the schema. secret is the JWT secret the processes share.
func NewStack(t *testing.T, secret string, o StackOptions) *Stack {
	t.Helper()
	if o.DatabaseURL == "" {
		o.DatabaseURL = DatabaseURL(t)
	}
	if o.RedisURL == "" {
		_, db := Redis(t)
		o.RedisURL = RedisURL(RedisAddr(t), db)
	}
	s := &Stack{Temporal: o.Temporal}
	if s.Temporal == nil {
		s.Temporal = NewTemporal(t)
		s.Temporal.Args = o.TemporalArgs
		s.Temporal.Start()
	}
	s.Env = append([]string{
		"DATABASE_URL=" + o.DatabaseURL,
		"REDIS_ADDR=" + o.RedisURL,
		"TEMPORAL_ADDRESS=" + s.Temporal.Address(),
		"SECKILL_JWT_SECRET=" + secret,
	}, o.Env...)
	s.Seckill(t, "migrate")
	return s
}

// Seckill runs a one-shot command of the binary against the stack and
// returns what it printed.
func (s *Stack) Seckill(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = append(cmd.Environ(), s.Env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("seckill %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
