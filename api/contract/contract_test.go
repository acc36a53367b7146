package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

const secret = "contract-secret-contract-secret-0123"

// tool finds a command the contract test needs: without it the test
// skips, or fails when the services are required (CI installs them, see
// .ci/run).
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("SECKILL_REQUIRE_SERVICES") == "1" {
		t.Fatalf("%s is required (SECKILL_REQUIRE_SERVICES=1) but not installed: %v; run the tests through .ci/run", name, err)
	}
	t.Skipf("%s not installed (%v); run the tests through .ci/run", name, err)
	return ""
}

// sh runs a command in dir and returns its standard output, failing the
// test with all it printed if it fails.
func sh(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s%s", name, strings.Join(args, " "), dir, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func TestGeneratedClients(t *testing.T) {
	node, npm, goCmd := tool(t, "node"), tool(t, "npm"), tool(t, "go")
	ts, err := filepath.Abs("ts")
	if err != nil {
		t.Fatal(err)
	}
	goDir, _ := filepath.Abs("go")

	// The TypeScript tools, as package-lock.json pins them.
	if _, err := os.Stat(filepath.Join(ts, "node_modules", ".package-lock.json")); err != nil {
		sh(t, ts, nil, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	}

	// Redocly's recommended lint: no error and no warning but the ones
	// api/openapi/.redocly.lint-ignore.yaml names with their reasons.
	for _, doc := range []string{"openapi.json", "openapi-3.0.json"} {
		out := sh(t, ts, nil, filepath.Join(ts, "node_modules", ".bin", "redocly"), "lint",
			"--config", "../../openapi/redocly.yaml", "--format", "json", "../../openapi/"+doc)
		var report struct {
			Totals struct{ Errors, Warnings int } `json:"totals"`
		}
		if json.Unmarshal([]byte(out), &report) != nil {
			t.Fatalf("redocly lint %s: unreadable report:\n%s", doc, out)
		}
		if report.Totals.Errors+report.Totals.Warnings > 0 {
			t.Errorf("redocly lint %s: %d errors, %d warnings:\n%s", doc, report.Totals.Errors, report.Totals.Warnings, out)
		}
	}

	// Generate both clients from the committed documents and compile them
	// strictly, before anything runs.
	goEnv := []string{"GOWORK=off", "GOFLAGS=-mod=readonly"}
	sh(t, goDir, goEnv, goCmd, "generate", "./...")
	sh(t, goDir, goEnv, goCmd, "vet", "./...")
	goJourney := filepath.Join(t.TempDir(), "journey")
	sh(t, goDir, goEnv, goCmd, "build", "-o", goJourney, "./journey")
	sh(t, ts, nil, filepath.Join(ts, "node_modules", ".bin", "openapi-typescript"),
		"../../openapi/openapi.json", "-o", "generated/seckill.ts")
	sh(t, ts, nil, filepath.Join(ts, "node_modules", ".bin", "tsc"), "-p", ".")

	// seckill serve and seckill worker, as in production, the orders paid
	// at the built-in provider: the journeys pay on its hosted page.
	port := testenv.FreePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	st := testenv.NewStack(t, secret, testenv.StackOptions{Env: []string{
		fmt.Sprintf("SECKILL_HTTP_ADDR=127.0.0.1:%d", port),
		"SECKILL_METRICS_ADDR=127.0.0.1:0",
		"SECKILL_PAYMENT_PROVIDER=builtin",
		"SECKILL_BUILTINPAY_SECRET_KEY=contract-pay-secret-key",
		"SECKILL_BUILTINPAY_WEBHOOK_SECRET=contract-pay-webhook-secret",
		"SECKILL_BUILTINPAY_URL=" + api + "/pay/",
	}})
	serve := testenv.Run(t, "serve", st.Env, "serve")
	worker := testenv.Run(t, "worker", st.Env, "worker")
	testenv.WaitHTTP(t, api+"/readyz", 60*time.Second)

	// The binary serves the committed documents.
	for _, c := range []struct{ file, path string }{{"openapi.json", "/openapi.json"}, {"openapi-3.0.json", "/openapi-3.0.json"}} {
		want, err := os.ReadFile(filepath.Join("..", "openapi", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if served := indented(t, get(t, api+c.path)); !bytes.Equal(served, want) {
			t.Errorf("seckill serve's %s differs from api/openapi/%s (go test ./api -run TestCommittedDocument -update rewrites it)", c.path, c.file)
		}
	}

	env := []string{
		"SECKILL_URL=" + api,
		"ADMIN_TOKEN=" + strings.TrimSpace(st.Seckill(t, "token", "--user", "contract-admin", "--role", "admin")),
		"BUYER_TOKEN=" + strings.TrimSpace(st.Seckill(t, "token", "--user", "contract-go")),
	}
	for _, j := range []struct {
		lang, dir, user string
		cmd             []string
	}{
		{"go", goDir, "contract-go", []string{goJourney}},
		{"ts", ts, "contract-ts", []string{node, "build/journey.js"}},
	} {
		env[2] = "BUYER_TOKEN=" + strings.TrimSpace(st.Seckill(t, "token", "--user", j.user))
		out := sh(t, j.dir, env, j.cmd[0], j.cmd[1:]...)
		t.Logf("%s", out)
		if !strings.Contains(out, j.lang+" journey: paid order") || !strings.Contains(out, "on the builtin provider's page") {
			t.Errorf("the %s journey did not pay on the built-in provider's page", j.lang)
		}
	}

	if t.Failed() {
		t.Logf("serve:\n%s\nworker:\n%s", serve.Output(), worker.Output())
	}
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return b
}

// indented is the committed form of a document (api/contract_doc_test.go).
func indented(t *testing.T, doc []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}
