package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // to read the killed dev's database

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/store"
)

// A crash of `seckill dev` between a 202 and its order's workflow start
// (issue 31) is said, not swallowed: the in-process Redis dies with the
// reservation, but the reconciler remembered the admission in the
// database, so the restarted dev logs the lost purchase as an error with
// its order id and buyer, and `seckill audit` fails naming them.
func TestDevKilledAfterA202ReportsTheLostPurchase(t *testing.T) {
	testenv.RedisAddr(t)
	dir := t.TempDir()
	port := testenv.FreePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	dbURL := "sqlite:" + filepath.Join(dir, "seckill.db")
	startDev := func(env ...string) *proc {
		p := run(t, "dev", append([]string{"SECKILL_JWT_SECRET=" + secret}, env...), "dev", "--data-dir", dir, "--seed-stock=0",
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--temporal-port=0", "--ui-port=-1", "--reconcile-interval=200ms")
		waitReady(t, api+"/readyz", 60*time.Second)
		return p
	}
	admin, buyer := tokens(t)

	// The relay holds the order's start back: the process dies between the
	// 202 and the workflow's start.
	dev := startDev("SECKILL_RELAY_START_DELAY=1h")
	sale := openSale(t, api, admin, 5)
	order := buy(t, api, sale, buyer)
	saleID, _ := strconv.ParseInt(sale, 10, 64)
	orderID, _ := strconv.ParseInt(order, 10, 64)
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testenv.Eventually(t, 30*time.Second, func() error {
		got, err := db.UnplacedAdmissions(ctx, saleID)
		if err != nil || len(got) != 1 || got[0].OrderID != orderID {
			return fmt.Errorf("remembered %+v (%v), want order %d", got, err, orderID)
		}
		return nil
	})
	dev.Kill()

	dev = startDev()
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, line := range strings.Split(dev.Output(), "\n") {
			if strings.Contains(line, "ERROR") && strings.Contains(line, "accepted purchases lost") &&
				strings.Contains(line, order) && strings.Contains(line, "e2e-buyer") {
				return nil
			}
		}
		return errors.New("the restarted dev has not logged the lost purchase as an error with its order id and buyer")
	})

	banner := func(name string) string {
		m := regexp.MustCompile(`(?m)^  ` + name + ` +(\S+)$`).FindStringSubmatch(dev.Stdout())
		if m == nil {
			t.Fatalf("dev printed no %s address:\n%s", name, dev.Stdout())
		}
		return m[1]
	}
	audit := exec.Command(testenv.Binary(t), "audit", "--settled", "--sale", sale, "--database-url", dbURL,
		"--redis-addr", banner("Redis"), "--temporal-address", banner("Temporal"))
	out, err := audit.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("audit: %v, want exit 1:\n%s", err, out)
	}
	want := fmt.Sprintf("1 accepted purchases lost: Redis lost their reservations before their orders were written: order %s (buyer e2e-buyer)", order)
	if !strings.Contains(string(out), want) {
		t.Fatalf("audit does not say %q:\n%s", want, out)
	}
}
