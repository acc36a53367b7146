package testenv

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary returns a plain (non-race) build of the seckill command:
// $SECKILL_BIN if set (CI builds it once), else a build made for this test
// process. The Temporal server inside it is far too slow under the race
// detector, and the race detector is for our code, which the tests run
// in-process.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SECKILL_BIN"); p != "" {
		return p
	}
	binOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			binErr = err
			return
		}
		dir, err := os.MkdirTemp("", "seckill-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "seckill")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/seckill")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build seckill: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// FreePort returns a TCP port on loopback for a server the test starts
// later, reserved for the test's life. A port the kernel hands out for
// ":0" is in the ephemeral range, where any outgoing connection of any
// process on the machine can take it before the server binds it (CI saw
// it). So the port is drawn from below that range, is free when drawn, and
// is claimed by an flock on a file in the temporary directory, which the
// other test processes of the run respect and which ends with the test
// (or its process).
func FreePort(t testing.TB) int {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "seckill-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	const low, high = 20000, 32768 // below Linux's default ip_local_port_range
	for range 1000 {
		port := low + rand.IntN(high-low)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another test holds it
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			f.Close() // something outside the tests listens there
			continue
		}
		l.Close()
		t.Cleanup(func() { f.Close() })
		return port
	}
	t.Fatal("no free port on loopback below the ephemeral range")
	return 0
}

// Temporal is a Temporal dev server running as a child process, so a test
// can stop and start it like a real outage.
type Temporal struct {
	t       testing.TB
	bin     string
	port    int
	dataDir string
	// Args are more arguments of `seckill temporal` (e.g. --api-key K),
	// set before Start.
	Args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartTemporal starts a Temporal dev server of the test's own, on a free
// port, with state in a temporary directory so it survives Stop/Start.
func StartTemporal(t testing.TB) *Temporal {
	t.Helper()
	tp := NewTemporal(t)
	tp.Start()
	return tp
}

// NewTemporal prepares a server without starting it: for tests where
// Temporal comes up late.
func NewTemporal(t testing.TB) *Temporal {
	t.Helper()
	if os.Getenv("SECKILL_TEST_DATABASE_URL") == "" && os.Getenv("SECKILL_REQUIRE_SERVICES") != "1" {
		t.Skip("services not configured; run the tests through .ci/run")
	}
	tp := &Temporal{t: t, bin: Binary(t), port: FreePort(t), dataDir: t.TempDir()}
	t.Cleanup(tp.Stop)
	return tp
}

// Address is the frontend's host:port.
func (tp *Temporal) Address() string { return fmt.Sprintf("127.0.0.1:%d", tp.port) }

// Start starts the server and returns once it is ready.
func (tp *Temporal) Start() {
	tp.t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.cmd != nil {
		tp.t.Fatal("temporal already running")
	}
	cmd := exec.Command(tp.bin, append([]string{"temporal", "--port", fmt.Sprint(tp.port), "--ui-port=-1", "--data-dir", tp.dataDir}, tp.Args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tp.t.Fatal(err)
	}
	cmd.Stderr = &prefixWriter{t: tp.t, prefix: "temporal: "}
	if err := cmd.Start(); err != nil {
		tp.t.Fatal(err)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "temporal ready") {
				ready <- nil
				break
			}
		}
		ready <- fmt.Errorf("temporal exited before it was ready")
		_, _ = io.Copy(io.Discard, stdout)
	}()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case err := <-ready:
		if err != nil {
			tp.t.Fatal(err)
		}
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		tp.t.Fatal("temporal did not become ready within 90s")
	}
	tp.cmd, tp.done = cmd, done
}

// Stop stops the server (SIGINT, then SIGKILL after 10 s) and waits for it.
func (tp *Temporal) Stop() { tp.end(syscall.SIGINT) }

// Kill kills the server with SIGKILL, as a crash would, and waits for it.
func (tp *Temporal) Kill() { tp.end(syscall.SIGKILL) }

// end signals a running server with sig and waits for it to exit.
func (tp *Temporal) end(sig os.Signal) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.cmd == nil {
		return
	}
	stopOrKill(tp.cmd, tp.done, sig)
	tp.cmd = nil
}

// Client returns a client of the server, closed when the test ends. It is
// lazy, so it can be made while the server is down.
func (tp *Temporal) Client() client.Client {
	tp.t.Helper()
	c, err := client.NewLazyClient(client.Options{HostPort: tp.Address(), Logger: quietLogger{}})
	if err != nil {
		tp.t.Fatal(err)
	}
	tp.t.Cleanup(c.Close)
	return c
}

// prefixWriter sends a child's log lines to the test log.
type prefixWriter struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		logLine(w.t, w.prefix+line)
	}
	return len(p), nil
}

// logLine logs unless the test is over (t.Log then panics).
func logLine(t testing.TB, line string) {
	defer func() { _ = recover() }()
	t.Log(line)
}

// quietLogger drops the SDK's log lines; tests assert on state, not logs.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
