package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
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
	// The workflow survived too: paying still works, and the buyer still
	// holds their unit.
	bc := client.New(api, buyer, nil)
	if paid, err := bc.Pay(ctx, order); err != nil || !paid.Recorded || paid.Order.Status != domain.StatusPaid {
		t.Fatalf("pay after restart: %v %+v", err, paid)
	}
	var refused *client.Error
	if _, err := bc.Purchase(ctx, sale, ""); !errors.As(err, &refused) || refused.StatusCode != http.StatusConflict {
		t.Fatalf("second purchase after restart: %v, want 409", err)
	}
}
