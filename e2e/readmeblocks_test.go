package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// Every shell block of README.md runs in a test, so that none drifts from
// the binary: a newcomer pastes them as they are. readmeBlockTests names,
// for each block by the heading it sits under and its place there, the test
// that runs it; TestEveryReadmeBlockHasATest fails on a block none claims.
// The runners run the block's own text with bash; what they change in it
// (addresses, secrets, the shard count) is listed beside each, and a
// substitution that no longer finds its text fails the test.

// readmeBlock is one ```sh block of README.md.
type readmeBlock struct {
	heading string // the nearest heading above it, without the #s
	index   int    // its place among the blocks under that heading
	text    string
}

func (b readmeBlock) key() string { return fmt.Sprintf("%s #%d", b.heading, b.index) }

// readmeBlockTests: every block, and who runs it.
var readmeBlockTests = map[string]string{
	"The two commands #0":               "TestReadmeTourAgainstDev starts seckill dev with this command (its settings in the environment)",
	"The two commands #1":               "internal/testenv TestCIRunsTheReadmeTestCommand: .ci/run runs this command, character for character",
	"60-second tour #0":                 "TestReadmeTourAgainstDev, TestServeAndWorkerProcesses, TestTemporalOnPostgres",
	"REST API #0":                       "TestReadmeTourAgainstDev, after the tour, on the tour's sale",
	"Generating a client #0":            "TestReadmeGeneratesClients",
	"Production with docker compose #0": "none: it needs a Docker engine, which CI does not have (docker-compose.yml is checked by e2e/lockdown_test.go)",
	"Production by hand: Temporal on Postgres, services split #0": "TestReadmeProductionByHand",
}

// readmeBlocks parses README.md's shell blocks.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks  []readmeBlock
		heading string
		count   = map[string]int{}
		in      *strings.Builder
	)
	for _, line := range strings.Split(string(readme), "\n") {
		switch {
		case in != nil && line == "```":
			blocks = append(blocks, readmeBlock{heading, count[heading], in.String()})
			count[heading]++
			in = nil
		case in != nil:
			in.WriteString(line + "\n")
		case line == "```sh":
			in = new(strings.Builder)
		case strings.HasPrefix(line, "```"):
			// another language (a diagram, PromQL): not a command
		case strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	return blocks
}

// readmeBlockText is the block claimed under key.
func readmeBlockText(t *testing.T, key string) string {
	t.Helper()
	for _, b := range readmeBlocks(t) {
		if b.key() == key {
			return b.text
		}
	}
	t.Fatalf("README.md has no shell block %q", key)
	return ""
}

func TestEveryReadmeBlockHasATest(t *testing.T) {
	blocks := readmeBlocks(t)
	seen := map[string]bool{}
	for _, b := range blocks {
		seen[b.key()] = true
		if readmeBlockTests[b.key()] == "" {
			t.Errorf("README.md's shell block %q has no test:\n%s", b.key(), b.text)
		}
	}
	for key := range readmeBlockTests {
		if !seen[key] {
			t.Errorf("readmeBlockTests names %q, which README.md no longer has", key)
		}
	}
}

// substitute applies the replacements (old, new, old, new, …) to a README
// block, failing if one of them no longer finds its text.
func substitute(t *testing.T, block string, pairs ...string) string {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(block, pairs[i]) {
			t.Fatalf("the README block no longer contains %q: update the test's substitutions\n%s", pairs[i], block)
		}
		block = strings.ReplaceAll(block, pairs[i], pairs[i+1])
	}
	return block
}

// runBlock runs script with bash -euo pipefail in dir, with seckill on
// PATH and env added, within limit, and returns what it printed. What the
// script left running in the background (a server it started with &) is
// ended with it: bash and its children get a process group of their own.
func runBlock(t *testing.T, dir, script string, env []string, limit time.Duration) string {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("README's blocks need %s: %v", tool, err)
		}
	}
	bin := t.TempDir()
	if err := os.Symlink(testenv.Binary(t), filepath.Join(bin, "seckill")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}, env...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A file, not a pipe: what the block leaves running writes on after
	// bash has exited, and Wait must not wait for it.
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	group := cmd.Process.Pid
	t.Cleanup(func() { endGroup(group) })
	printed := func() string {
		b, _ := os.ReadFile(out.Name())
		return string(b)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the README block failed: %v\n%s", err, printed())
		}
	case <-time.After(limit):
		endGroup(group)
		<-done
		t.Fatalf("the README block hung:\n%s", printed())
	}
	return printed()
}

// endGroup ends a process group: SIGTERM, then SIGKILL to what is left
// after 10 s.
func endGroup(pgid int) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // nothing left
	}
	for range 100 {
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling a process group's end: nothing to wait on
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// The paging example of "REST API", on the sale the tour made: its one
// paid order, as NDJSON page by page and as CSV.
func runPagingBlock(t *testing.T, api, adminToken, sale string) {
	t.Helper()
	dir := t.TempDir()
	runBlock(t, dir, readmeBlockText(t, "REST API #0"), []string{"API=" + api, "ADMIN_TOKEN=" + adminToken, "SALE=" + sale}, time.Minute)
	ndjson, err := os.ReadFile(filepath.Join(dir, "paid.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(ndjson)), "\n")
	var o struct {
		Status string `json:"status"`
		SaleID string `json:"sale_id"`
	}
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &o) != nil || o.Status != "PAID" || o.SaleID != sale {
		t.Errorf("the paging walk wrote %q; want the tour's one paid order of sale %s", ndjson, sale)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "paid.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if rows := strings.Split(strings.TrimSpace(string(csv)), "\n"); len(rows) != 2 || !strings.Contains(rows[1], ",PAID,") {
		t.Errorf("the export wrote %q; want a header and the one paid order", csv)
	}
}

// "Generating a client": both generators, at the versions the README
// names, on the committed documents. api/contract compiles and runs the
// clients they make; this checks the README's own lines run and pin the
// versions the contract test uses.
func TestReadmeGeneratesClients(t *testing.T) {
	testenv.RedisAddr(t) // CI's tools (node, npx) come with the services
	block := readmeBlockText(t, "Generating a client #0")
	for _, pin := range []struct{ file, re string }{
		{"../api/contract/go/go.mod", `github\.com/oapi-codegen/oapi-codegen/v2 (v[0-9.]+)`},
		{"../api/contract/ts/package.json", `"openapi-typescript": "([0-9.]+)"`},
	} {
		b, err := os.ReadFile(pin.file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(pin.re).FindSubmatch(b)
		if m == nil || !strings.Contains(block, "@"+string(m[1])+" ") {
			t.Errorf("the README's client block does not name the version %s pins (%q)", pin.file, m)
		}
	}
	dir := t.TempDir()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(repo, "api"), filepath.Join(dir, "api")); err != nil {
		t.Fatal(err)
	}
	runBlock(t, dir, block, nil, 5*time.Minute)
	for file, want := range map[string]string{
		"seckill.gen.go": "func NewClient(",
		"seckill.ts":     "export interface paths",
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s lacks %q (%v)", file, want, err)
		}
	}
}

// "Production by hand": the block as written, on loopback: its addresses
// and secrets become the test's, its ports free ones, and its 512 shards 8
// (the count only sizes the database).
func TestReadmeProductionByHand(t *testing.T) {
	secretValue := "readme-by-hand-" + fmt.Sprint(time.Now().UnixNano())
	_, db := testenv.Redis(t)
	ports := map[string]string{}
	for _, p := range []string{"7233", "8233", "8000", "8001", "8080"} {
		ports[p] = fmt.Sprint(testenv.FreePort(t))
	}
	script := substitute(t, readmeBlockText(t, "Production by hand: Temporal on Postgres, services split #0"),
		"postgres://seckill:…@db:5432/seckill?sslmode=disable", testenv.DatabaseURL(t),
		"redis:6379", testenv.RedisURL(testenv.RedisAddr(t), db),
		"SECKILL_JWT_SECRET=…", "SECKILL_JWT_SECRET="+secretValue,
		"postgres://temporal:…@db:5432/temporal?sslmode=disable", testenv.TemporalDatabaseURL(t),
		"--history-shards 512", "--history-shards 8",
	)
	for old, port := range ports {
		script = regexp.MustCompile(`\b`+old+`\b`).ReplaceAllString(script, port)
	}
	dir := t.TempDir()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(repo, "deploy"), filepath.Join(dir, "deploy")); err != nil {
		t.Fatal(err)
	}
	out := runBlock(t, dir, script, []string{
		// serve's own address: the block's curl asks 8080, serve's default
		"SECKILL_HTTP_ADDR=127.0.0.1:" + ports["8080"],
		"SECKILL_METRICS_ADDR=127.0.0.1:0",
	}, 4*time.Minute)
	var probe struct {
		Workflows int     `json:"workflows"`
		Rate      float64 `json:"workflows_per_second"`
	}
	var answer string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"workflows_per_second"`) {
			answer = line
		}
	}
	if err := json.Unmarshal([]byte(answer), &probe); err != nil || probe.Workflows != 1000 || probe.Rate <= 0 {
		t.Fatalf("the block's engine probe answered %q (%v); want 1,000 workflows measured\n%s", answer, err, out)
	}
	t.Logf("the README's production shape: %d no-op workflows at %.0f/s", probe.Workflows, probe.Rate)
}
