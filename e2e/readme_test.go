package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// tourScript is the shell block of README.md's "60-second tour".
func tourScript(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## 60-second tour.*?```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no tour block")
	}
	return string(m[1])
}

// runTour runs the README tour with bash against api, with seckill on PATH,
// and checks what it shows.
func runTour(t *testing.T, api, adminToken, buyerToken string) {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README tour needs %s: %v", tool, err)
		}
	}
	dir := t.TempDir()
	if err := os.Symlink(testenv.Binary(t), filepath.Join(dir, "seckill")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", tourScript(t))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"API="+api, "ADMIN_TOKEN="+adminToken, "BUYER_TOKEN="+buyerToken)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// A child the tour left behind (seckill watch) may hold the output
	// open: once bash has exited, Wait stops copying after this long.
	cmd.WaitDelay = 5 * time.Second
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("README tour failed: %v\n%s", err, out.String())
		}
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		<-done // the output is read once nothing writes it any more
		t.Fatalf("README tour hung:\n%s", out.String())
	}
	text := out.String()
	t.Logf("README tour output:\n%s", text)
	order := regexp.MustCompile(`order (\d+)`).FindStringSubmatch(text)
	if order == nil {
		t.Fatal("the tour printed no order id")
	}
	for _, want := range []string{
		"\nPAID\n", // step 5
		fmt.Sprintf(`{"order_id":"%s","status":"AWAITING_PAYMENT"}`, order[1]),
		fmt.Sprintf(`{"order_id":"%s","status":"PAID"}`, order[1]),
		`"orders":{"PAID":1}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the tour's output lacks %q", want)
		}
	}
}

func TestReadmeTourAgainstDev(t *testing.T) {
	testenv.RedisAddr(t) // dev mode needs nothing, but CI's tools (jq) come with the services
	port := testenv.FreePort(t)
	uiPort := testenv.FreePort(t)
	dev := run(t, "dev", nil, "dev", "--memory", "--http-addr", fmt.Sprintf("127.0.0.1:%d", port),
		"--temporal-port=0", fmt.Sprintf("--ui-port=%d", uiPort))
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	start := time.Now()
	waitReady(t, api+"/readyz", 60*time.Second)
	t.Logf("seckill dev ready in %s", time.Since(start).Round(time.Millisecond))
	testenv.Eventually(t, 10*time.Second, func() error {
		if exported(dev.Stdout(), "BUYER_TOKEN") == "" {
			return fmt.Errorf("no tokens printed yet")
		}
		return nil
	})
	out := dev.Stdout()
	for _, want := range []string{api + "/v1", api + "/docs", fmt.Sprintf("http://127.0.0.1:%d/namespaces/default/workflows", uiPort), "Demo sale"} {
		if !strings.Contains(out, want) {
			t.Errorf("seckill dev did not print %q:\n%s", want, out)
		}
	}
	// The Temporal Web UI serves its page.
	body := get(t, fmt.Sprintf("http://127.0.0.1:%d/", uiPort))
	if !strings.Contains(strings.ToLower(body), "<html") {
		t.Fatalf("Temporal Web UI did not serve HTML: %.200s", body)
	}
	runTour(t, api, exported(out, "ADMIN_TOKEN"), exported(out, "BUYER_TOKEN"))

	code, took := dev.Interrupt()
	if code != 0 || took > 10*time.Second {
		t.Fatalf("seckill dev exited %d after %s on SIGINT, want 0 within 10s", code, took)
	}
}
