package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment/builtin"
)

const secret = "e2e-secret-e2e-secret-e2e-secret-e2e"

func newSigner() (*auth.Signer, error) { return auth.NewSigner(secret) }

func tokens(t *testing.T) (admin, buyer string) {
	t.Helper()
	s, err := newSigner()
	if err != nil {
		t.Fatal(err)
	}
	admin, _ = s.Mint("e2e-admin", auth.RoleAdmin, time.Hour)
	buyer, _ = s.Mint("e2e-buyer", auth.RoleBuyer, time.Hour)
	return admin, buyer
}

func TestDevRestartKeepsOrdersAndWorkflows(t *testing.T) {
	testenv.RedisAddr(t)
	dir := t.TempDir()
	port := testenv.FreePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	startDev := func() *proc {
		p := run(t, "dev", []string{"SECKILL_JWT_SECRET=" + secret}, "dev", "--data-dir", dir,
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--temporal-port=0", "--ui-port=0")
		waitReady(t, api+"/readyz", 60*time.Second)
		return p
	}
	admin, buyer := tokens(t)

	dev := startDev()
	sale := openSale(t, api, admin, 3)
	order := buy(t, api, sale, buyer)
	testenv.Eventually(t, time.Minute, func() error {
		if s := orderStatus(t, api, order, buyer); s != "AWAITING_PAYMENT" {
			return fmt.Errorf("order is %q", s)
		}
		return nil
	})
	if code, took := dev.Interrupt(); code != 0 || took > 10*time.Second {
		t.Fatalf("exit %d after %s, want 0 within 10s", code, took)
	}

	startDev()
	if s := orderStatus(t, api, order, buyer); s != "AWAITING_PAYMENT" {
		t.Fatalf("after the restart the order is %q, want AWAITING_PAYMENT", s)
	}
	ctx := context.Background()
	s, _ := client.New(api, "", nil).Sale(ctx, sale)
	if s.Remaining != 2 {
		t.Fatalf("after the restart remaining = %d, want 2", s.Remaining)
	}
	// The workflow survived too: paying still works (at dev's built-in
	// provider: pay answers its page, whose Pay decides), and the buyer
	// still holds their unit.
	bc := client.New(api, buyer, nil)
	started, err := bc.Pay(ctx, order)
	if err != nil || started.Order.Status != domain.StatusAwaitingPayment || started.Order.Payment == nil {
		t.Fatalf("pay after restart: %v %+v, want a payment at the provider", err, started)
	}
	if status, _, err := builtin.PressButton(ctx, nil, started.Order.Payment.RedirectURL, "pay"); err != nil || status != http.StatusSeeOther {
		t.Fatalf("pay on the provider's page after restart: %d %v, want 303", status, err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if s := orderStatus(t, api, order, buyer); s != "PAID" {
			return fmt.Errorf("order %s is %s", order, s)
		}
		return nil
	})
	var refused *client.Error
	if _, err := bc.Purchase(ctx, sale, ""); !errors.As(err, &refused) || refused.StatusCode != http.StatusConflict {
		t.Fatalf("second purchase after restart: %v, want 409", err)
	}
}

// A clean stop of `seckill dev` loses no 202: stopped while an admitted
// order's workflow has not started yet (the relay holds it back here for
// 3 s), dev waits for the order to be placed before it exits, says so, and
// the restarted dev has the order (its in-process Redis keeps nothing).
func TestDevStopKeepsAdmittedOrders(t *testing.T) {
	testenv.RedisAddr(t)
	dir := t.TempDir()
	port := testenv.FreePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	startDev := func(env ...string) *proc {
		p := run(t, "dev", append([]string{"SECKILL_JWT_SECRET=" + secret}, env...), "dev", "--data-dir", dir, "--seed-stock=0",
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--temporal-port=0", "--ui-port=0")
		waitReady(t, api+"/readyz", 60*time.Second)
		return p
	}
	admin, buyer := tokens(t)

	dev := startDev("SECKILL_RELAY_START_DELAY=3s")
	sale := openSale(t, api, admin, 5)
	order := buy(t, api, sale, buyer)
	if s := orderStatus(t, api, order, buyer); s != "PENDING" {
		t.Fatalf("the order is %q before the stop, want PENDING (its start held back)", s)
	}
	if code, took := dev.Interrupt(); code != 0 || took > 20*time.Second {
		t.Fatalf("exit %d after %s, want 0", code, took)
	}
	if out := dev.Output(); !strings.Contains(out, "every admitted order is placed") {
		t.Errorf("dev did not say it waited for the admitted order:\n%s", out)
	}

	startDev()
	if s := orderStatus(t, api, order, buyer); s != "AWAITING_PAYMENT" {
		t.Fatalf("after the restart the order is %q, want AWAITING_PAYMENT", s)
	}
	s, err := client.New(api, "", nil).Sale(context.Background(), sale)
	if err != nil || s.Remaining != 4 {
		t.Fatalf("after the restart remaining = %d (%v), want 4", s.Remaining, err)
	}
}

// Two `seckill dev` on one data directory would share the embedded
// Temporal's database and take its shard from each other: the second
// refuses to start, naming the first.
func TestDevDataDirIsLocked(t *testing.T) {
	testenv.RedisAddr(t)
	dir := t.TempDir()
	port := testenv.FreePort(t)
	first := run(t, "dev-1", []string{"SECKILL_JWT_SECRET=" + secret}, "dev", "--data-dir", dir, "--seed-stock=0",
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--temporal-port=0", "--ui-port=-1")
	waitReady(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", port), 60*time.Second)

	second := run(t, "dev-2", []string{"SECKILL_JWT_SECRET=" + secret}, "dev", "--data-dir", dir, "--seed-stock=0",
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), "--temporal-port=0", "--ui-port=-1")
	testenv.Eventually(t, time.Minute, func() error {
		if !second.Exited() {
			return errors.New("a second dev on the same data directory is running")
		}
		return nil
	})
	if code := second.ExitCode(); code == 0 {
		t.Fatal("a second dev on the same data directory exited 0")
	}
	want := fmt.Sprintf("another seckill dev (pid %d) is using the data directory", first.Pid())
	if !strings.Contains(second.Output(), want) || !strings.Contains(second.Output(), "--data-dir") {
		t.Fatalf("the second dev's refusal does not name the first (%q):\n%s", want, second.Output())
	}
	if first.Exited() {
		t.Fatal("the first dev stopped")
	}
}

// dev keeps its token secret with its data: the tokens it printed work
// after a restart, and `seckill token` run beside it mints tokens it
// accepts without being given the secret. Without a secret anywhere, the
// command says what is missing, once.
func TestDevTokensSurviveARestart(t *testing.T) {
	testenv.RedisAddr(t)
	dir := filepath.Join(t.TempDir(), "data")
	port := testenv.FreePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	startDev := func() *proc {
		p := run(t, "dev", nil, "dev", "--data-dir", dir, "--seed-stock=0",
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--temporal-port=0", "--ui-port=-1")
		waitReady(t, api+"/readyz", 60*time.Second)
		testenv.Eventually(t, 10*time.Second, func() error {
			if exported(p.Stdout(), "BUYER_TOKEN") == "" {
				return errors.New("no BUYER_TOKEN printed yet")
			}
			return nil
		})
		return p
	}
	dev := startDev()
	printed := exported(dev.Stdout(), "BUYER_TOKEN")
	if !strings.Contains(dev.Stdout(), "Data           "+dir) {
		t.Errorf("the banner does not name the data directory:\n%s", dev.Stdout())
	}
	token := func(env ...string) (string, string, error) {
		cmd := exec.Command(testenv.Binary(t), "token", "--user", "bob")
		cmd.Env = append(cmd.Environ(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), stderr.String(), err
	}
	minted, _, err := token("SECKILL_DATA_DIR=" + dir)
	if err != nil {
		t.Fatalf("seckill token beside dev: %v", err)
	}
	if code, took := dev.Interrupt(); code != 0 {
		t.Fatalf("exit %d after %s", code, took)
	}
	startDev()
	for name, tok := range map[string]string{"printed before the restart": printed, "minted by seckill token": minted} {
		if status := call(t, "GET", api+"/v1/orders", tok, nil, nil); status != http.StatusOK {
			t.Errorf("a token %s: GET /v1/orders = %d after the restart, want 200", name, status)
		}
	}
	_, stderr, err := token("SECKILL_DATA_DIR=" + t.TempDir())
	if err == nil || strings.Count(stderr, "is required") != 1 {
		t.Errorf("seckill token without a secret: %v, want one error line saying what is required:\n%s", err, stderr)
	}
}

// A data directory made by an earlier build (no format marker) is
// upgraded in place; one made by a newer build is refused, naming
// --reset, which starts afresh.
func TestDevDataDirFormat(t *testing.T) {
	testenv.RedisAddr(t)
	dir := filepath.Join(t.TempDir(), "data")
	port := testenv.FreePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	dev := func(args ...string) *proc {
		return run(t, "dev", []string{"SECKILL_JWT_SECRET=" + secret}, append([]string{"dev", "--data-dir", dir, "--seed-stock=0",
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--temporal-port=0", "--ui-port=-1"}, args...)...)
	}
	stop := func(p *proc) {
		if code, took := p.Interrupt(); code != 0 {
			t.Fatalf("exit %d after %s", code, took)
		}
	}
	admin, _ := tokens(t)
	first := dev()
	waitReady(t, api+"/readyz", 60*time.Second)
	sale := openSale(t, api, admin, 3)
	stop(first)

	// As an earlier build left it: no marker.
	if err := os.Remove(filepath.Join(dir, "format")); err != nil {
		t.Fatal(err)
	}
	older := dev()
	waitReady(t, api+"/readyz", 60*time.Second)
	if !strings.Contains(older.Output(), "upgraded in place") {
		t.Errorf("no word of the upgrade:\n%s", older.Output())
	}
	if s, err := client.New(api, "", nil).Sale(context.Background(), sale); err != nil || s.ID != sale {
		t.Fatalf("the sale after the upgrade: %+v %v", s, err)
	}
	stop(older)

	// As a newer build would leave it.
	if err := os.WriteFile(filepath.Join(dir, "format"), []byte("999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused := dev()
	if code := refused.ExitCode(); code == 0 || !strings.Contains(refused.Output(), "made by a newer seckill") || !strings.Contains(refused.Output(), "--reset") {
		t.Fatalf("a newer data directory: exit %d\n%s", code, refused.Output())
	}
	dev("--reset")
	waitReady(t, api+"/readyz", 60*time.Second)
	if _, err := client.New(api, "", nil).Sale(context.Background(), sale); err == nil {
		t.Fatal("the sale survived --reset")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "format")); strings.TrimSpace(string(b)) != "1" {
		t.Errorf("format after --reset: %q", b)
	}
}
