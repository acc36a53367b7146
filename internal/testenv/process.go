package testenv

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
)

// Process is a seckill process started by a test.
type Process struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu  sync.Mutex
	out strings.Builder // stdout
	all strings.Builder // stdout and stderr
}

// Run starts the seckill binary with args and extra environment; it is
// killed when the test ends.
func Run(t *testing.T, name string, env []string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	p := &Process{t: t, name: name, cmd: cmd, done: make(chan struct{})}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(stdout, true) })
	wg.Go(func() { p.copy(stderr, false) })
	go func() { wg.Wait(); _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Kill() })
	return p
}

func (p *Process) copy(r io.Reader, keep bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		if keep {
			p.out.WriteString(line + "\n")
		}
		p.all.WriteString(line + "\n")
		p.mu.Unlock()
		func() {
			defer func() { _ = recover() }() // the test may have ended
			if !strings.Contains(line, "component=temporal-server") {
				p.t.Logf("%s: %s", p.name, line)
			}
		}()
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output is everything the process printed so far, logs included.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.all.String()
}

// Stdout is what the process printed on its standard output so far.
func (p *Process) Stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Interrupt sends SIGINT and returns the exit code and how long the
// process took to exit (fails after 20 s).
func (p *Process) Interrupt() (int, time.Duration) {
	p.t.Helper()
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.Kill()
		p.t.Fatalf("%s did not exit within 20s of SIGINT", p.name)
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(start)
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode is the exit code of a process that has exited.
func (p *Process) ExitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// Kill ends the process at once (a crash).
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// WaitHTTP polls url until it answers 200.
func WaitHTTP(t *testing.T, url string, within time.Duration) {
	t.Helper()
	Eventually(t, within, func() error {
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
