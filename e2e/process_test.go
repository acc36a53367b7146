// Package e2e drives the built seckill binary as a user and an operator
// would: the README tour against `seckill dev`, and against `seckill serve`
// + `seckill worker` as separate processes on real Postgres, Redis and
// Temporal.
package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// proc is a seckill process.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu  sync.Mutex
	out strings.Builder // stdout
}

// run starts the binary with args and extra environment.
func run(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{t: t, name: name, cmd: cmd, done: make(chan struct{})}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(stdout, true) })
	wg.Go(func() { p.copy(stderr, false) })
	go func() { wg.Wait(); _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) copy(r io.Reader, keep bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if keep {
			p.mu.Lock()
			p.out.WriteString(line + "\n")
			p.mu.Unlock()
		}
		func() {
			defer func() { _ = recover() }() // the test may have ended
			if !strings.Contains(line, "component=temporal-server") {
				p.t.Logf("%s: %s", p.name, line)
			}
		}()
	}
}

// stdout is what the process printed so far.
func (p *proc) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// interrupt sends SIGINT and returns the exit code and how long the
// process took to exit (fails after 20 s).
func (p *proc) interrupt() (int, time.Duration) {
	p.t.Helper()
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.kill()
		p.t.Fatalf("%s did not exit within 20s of SIGINT", p.name)
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(start)
}

// kill ends the process at once (a crash).
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitReady polls url until it answers 200.
func waitReady(t *testing.T, url string, within time.Duration) {
	t.Helper()
	testenv.Eventually(t, within, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d", url, resp.StatusCode)
		}
		return nil
	})
}

// exported finds `export NAME=value` in what a process printed.
func exported(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "export "+name+"="); ok {
			return v
		}
	}
	return ""
}
