package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stripe-mock, pinned to the release whose bundled OpenAPI spec is
// stripe-go's API version (payment/stripe's
// TestStripeMockBundlesTheLibrarysAPIVersion checks it). .ci/run reads the
// version from this line: change it here only.
const (
	StripeMockModule  = "github.com/stripe/stripe-mock"
	StripeMockVersion = "v0.197.0"
)

// The stripe-mock of this test process, started on first use and shared
// by its tests: stripe-mock keeps no state between requests, so nothing
// one test does shows in another's answers.
var stripeMock struct {
	once sync.Once
	url  string
	err  error
}

// StripeMockURL is the base URL of a running stripe-mock: STRIPE_MOCK_URL
// (.ci/run starts one), or one this test process builds once into the
// user's cache and starts on loopback ports of its own; it ends with the
// process. Without one the test is skipped, or failed with
// SECKILL_REQUIRE_SERVICES=1.
func StripeMockURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("STRIPE_MOCK_URL"); u != "" {
		return u
	}
	stripeMock.once.Do(func() { stripeMock.url, stripeMock.err = startStripeMock() })
	if stripeMock.err != nil {
		if os.Getenv("SECKILL_REQUIRE_SERVICES") == "1" {
			t.Fatalf("stripe-mock is required (SECKILL_REQUIRE_SERVICES=1) but could not be started: %v; set STRIPE_MOCK_URL or run the tests through .ci/run", stripeMock.err)
		}
		t.Skipf("stripe-mock not available (%v); set STRIPE_MOCK_URL or run the tests through .ci/run", stripeMock.err)
	}
	return stripeMock.url
}

// stripeMockBinary builds stripe-mock once per version into the user's
// cache (about a minute the first time; the module proxy serves it).
func stripeMockBinary() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "seckill", "stripe-mock-"+StripeMockVersion)
	bin := filepath.Join(dir, "stripe-mock")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Into a directory of its own, then renamed: a half-written binary is
	// never taken for a built one.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", StripeMockModule+"@"+StripeMockVersion)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %v: %s", StripeMockModule, StripeMockVersion, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "stripe-mock"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// startStripeMock starts stripe-mock on loopback ports the system picks
// (HTTPS too, or it would listen on all interfaces' 12112) and reads the
// HTTP one from what it prints. It is killed when this process ends,
// however it ends: its parent-death signal is tied to the thread that
// started it, so that thread is kept, locked, waiting for it.
func startStripeMock() (string, error) {
	bin, err := stripeMockBinary()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	listening := &addrWriter{addr: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = listening, listening
	started, exited := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the process
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return "", err
	}
	select {
	case a := <-listening.addr:
		return "http://" + a, nil
	case err := <-exited:
		return "", fmt.Errorf("stripe-mock exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return "", errors.New("stripe-mock printed no HTTP address within 30 s")
	}
}

// addrWriter takes stripe-mock's output and sends the HTTP address it
// prints it listens at, once; the rest is dropped.
type addrWriter struct {
	addr chan string
	line []byte
	done bool
}

func (w *addrWriter) Write(p []byte) (int, error) {
	const prefix = "Listening for HTTP at address: "
	for _, c := range p {
		if w.done {
			break
		}
		if c != '\n' {
			w.line = append(w.line, c)
			continue
		}
		if a, ok := strings.CutPrefix(string(w.line), prefix); ok {
			w.addr <- a
			w.done, w.line = true, nil
		}
		w.line = w.line[:0]
	}
	return len(p), nil
}
