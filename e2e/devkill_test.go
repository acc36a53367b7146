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

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/store"
)

// A crash of `seckill dev` between a 202 and its order's workflow start
// (issue 31) loses no purchase silently. The in-process Redis dies with
// the reservations, but the reconciler remembered the admissions in the
// database, so the restarted dev logs each lost purchase as an error with
// its order id and buyer; it admits again, under its order id, the one
// whose sale is still open (its order is placed after all), and `seckill
// audit` fails naming the one whose sale ended meanwhile.
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
	ctx := context.Background()

	// The relay holds every start back: the process dies between the 202s
	// and their workflows' starts.
	dev := startDev("SECKILL_RELAY_START_DELAY=1h")
	ends := time.Now().Add(4 * time.Second)
	newSale := func(ends time.Time) string {
		s, err := client.New(api, admin, nil).CreateSale(ctx, wire.CreateSaleBody{
			Name: "e2e", PriceCents: 500, Stock: 5, StartsAt: time.Now().Add(-time.Second), EndsAt: ends})
		if err != nil {
			t.Fatalf("create sale: %v", err)
		}
		return s.ID
	}
	ending, open := newSale(ends), newSale(time.Now().Add(time.Hour))
	lost, kept := buy(t, api, ending, buyer), buy(t, api, open, buyer)

	db, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, p := range [][2]string{{ending, lost}, {open, kept}} {
		sale, _ := strconv.ParseInt(p[0], 10, 64)
		order, _ := strconv.ParseInt(p[1], 10, 64)
		testenv.Eventually(t, 30*time.Second, func() error {
			got, err := db.UnplacedAdmissions(ctx, sale)
			if err != nil || len(got) != 1 || got[0].OrderID != order {
				return fmt.Errorf("sale %d remembers %+v (%v), want order %d", sale, got, err, order)
			}
			return nil
		})
	}
	dev.Kill()
	testenv.Eventually(t, 10*time.Second, func() error {
		if time.Now().Before(ends) {
			return errors.New("the first sale has not ended yet")
		}
		return nil
	})

	dev = startDev()
	logged := func(level, msg, order string) error {
		for _, line := range strings.Split(dev.Output(), "\n") {
			if strings.Contains(line, "level="+level) && strings.Contains(line, msg) && strings.Contains(line, order) &&
				(level != "ERROR" || strings.Contains(line, "e2e-buyer")) {
				return nil
			}
		}
		return fmt.Errorf("the restarted dev has not logged %q at %s naming order %s", msg, level, order)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		return errors.Join(logged("ERROR", "accepted purchases lost", lost), logged("ERROR", "accepted purchases lost", kept),
			logged("WARN", "admitted again under their order ids", kept))
	})
	testenv.Eventually(t, 30*time.Second, func() error {
		if s := orderStatus(t, api, kept, buyer); s != "AWAITING_PAYMENT" {
			return fmt.Errorf("the recovered order is %q", s)
		}
		return nil
	})

	banner := func(name string) string {
		m := regexp.MustCompile(`(?m)^  ` + name + ` +(\S+)$`).FindStringSubmatch(dev.Stdout())
		if m == nil {
			t.Fatalf("dev printed no %s address:\n%s", name, dev.Stdout())
		}
		return m[1]
	}
	audit := func(sale string) (int, string) {
		out, err := exec.Command(testenv.Binary(t), "audit", "--settled", "--sale", sale, "--database-url", dbURL,
			"--redis-addr", banner("Redis"), "--temporal-address", banner("Temporal")).CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("audit: %v\n%s", err, out)
		}
		if exit != nil {
			return exit.ExitCode(), string(out)
		}
		return 0, string(out)
	}
	code, out := audit(ending)
	want := fmt.Sprintf("1 accepted purchases lost: Redis lost their reservations before their orders were written: order %s (buyer e2e-buyer)", lost)
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("audit of the ended sale: exit %d, want 1 saying %q:\n%s", code, want, out)
	}
	if code, out := audit(open); code != 0 {
		t.Fatalf("audit of the sale whose purchase was recovered: exit %d, want 0:\n%s", code, out)
	}
}
