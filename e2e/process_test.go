// Package e2e drives the built seckill binary as a user and an operator
// would: the README tour against `seckill dev`, and against `seckill serve`
// + `seckill worker` as separate processes on real Postgres, Redis and
// Temporal.
package e2e

import (
	"strings"

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
