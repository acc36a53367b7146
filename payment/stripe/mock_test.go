package stripe

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v83"
)

// stripe-mock, pinned to the release whose bundled OpenAPI spec is the
// library's API version (TestStripeMockBundlesTheLibrarysAPIVersion checks
// it). .ci/run reads the version from this line: change it here only.
const (
	stripeMockModule  = "github.com/stripe/stripe-mock"
	stripeMockVersion = "v0.197.0"
)

// The stripe-mock these tests run against: STRIPE_MOCK_URL's (CI starts
// one), or one this test binary builds once into the user's cache and
// starts on a loopback port of its own, stopped by TestMain.
var mock struct {
	once sync.Once
	url  string
	err  error
	cmd  *exec.Cmd
}

func TestMain(m *testing.M) {
	code := m.Run()
	if mock.cmd != nil {
		_ = mock.cmd.Process.Kill()
		_ = mock.cmd.Wait()
	}
	os.Exit(code)
}

// stripeMockURL is the base URL of a running stripe-mock. Without one it
// skips the test, or fails it with SECKILL_REQUIRE_SERVICES=1 (as CI runs).
func stripeMockURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("STRIPE_MOCK_URL"); u != "" {
		return u
	}
	mock.once.Do(func() { mock.url, mock.err = startStripeMock() })
	if mock.err != nil {
		if os.Getenv("SECKILL_REQUIRE_SERVICES") == "1" {
			t.Fatalf("stripe-mock is required (SECKILL_REQUIRE_SERVICES=1) but could not be started: %v; set STRIPE_MOCK_URL or run the tests through .ci/run", mock.err)
		}
		t.Skipf("stripe-mock not available (%v); set STRIPE_MOCK_URL or run the tests through .ci/run", mock.err)
	}
	return mock.url
}

// stripeMockBinary builds stripe-mock once per version into the user's
// cache (about a minute the first time; the module proxy serves it).
func stripeMockBinary() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "seckill", "stripe-mock-"+stripeMockVersion)
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
	cmd := exec.Command("go", "install", stripeMockModule+"@"+stripeMockVersion)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %v: %s", stripeMockModule, stripeMockVersion, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "stripe-mock"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// startStripeMock starts stripe-mock on loopback ports the system picks
// (HTTPS too, or it would listen on all interfaces' 12112) and reads the
// HTTP one from what it prints.
func startStripeMock() (string, error) {
	bin, err := stripeMockBinary()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:")
	// Killed with this test binary, however it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return "", err
	}
	mock.cmd = cmd
	addr := make(chan string, 1)
	go func() {
		const prefix = "Listening for HTTP at address: "
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				addr <- a
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case a := <-addr:
		return "http://" + a, nil
	case <-time.After(30 * time.Second):
		return "", errors.New("stripe-mock printed no HTTP address within 30 s")
	}
}

// The stripe-mock the tests build bundles the OpenAPI spec of the
// library's API version: a request the library builds is validated against
// the API it was generated from.
func TestStripeMockBundlesTheLibrarysAPIVersion(t *testing.T) {
	out, err := exec.Command("go", "mod", "download", "-json", stripeMockModule+"@"+stripeMockVersion).Output()
	if err != nil {
		if os.Getenv("SECKILL_REQUIRE_SERVICES") == "1" {
			t.Fatalf("go mod download %s@%s: %v", stripeMockModule, stripeMockVersion, err)
		}
		t.Skipf("go mod download %s@%s: %v", stripeMockModule, stripeMockVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(mod.Dir, "embedded", "openapi", "spec3.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var spec struct {
		Info struct {
			Version string `json:"version"`
		} `json:"info"`
	}
	if err := json.NewDecoder(f).Decode(&spec); err != nil {
		t.Fatal(err)
	}
	if spec.Info.Version != stripego.APIVersion {
		t.Fatalf("stripe-mock %s bundles API version %q; stripe-go speaks %q: pin the stripe-mock release built from the library's OpenAPI version",
			stripeMockVersion, spec.Info.Version, stripego.APIVersion)
	}
}
