package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// runTour runs the README tour with bash against api, with seckill on
// PATH, checks what it shows and returns the tour's sale.
func runTour(t *testing.T, api, adminToken, buyerToken string) (sale string) {
	t.Helper()
	out := runBlock(t, t.TempDir(), readmeBlockText(t, "60-second tour #0"),
		[]string{"API=" + api, "ADMIN_TOKEN=" + adminToken, "BUYER_TOKEN=" + buyerToken}, 3*time.Minute)
	text := out
	t.Logf("README tour output:\n%s", text)
	order := regexp.MustCompile(`order (\d+)`).FindStringSubmatch(text)
	if order == nil {
		t.Fatal("the tour printed no order id")
	}
	for _, want := range []string{
		"\nAWAITING_PAYMENT\n", // step 5: pay started a payment; the page's Pay decides
		fmt.Sprintf(`{"order_id":"%s","status":"AWAITING_PAYMENT"}`, order[1]),
		fmt.Sprintf(`{"order_id":"%s","status":"PAID"}`, order[1]),
		`"orders":{"PAID":1}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the tour's output lacks %q", want)
		}
	}
	m := regexp.MustCompile(`"sale_id":"(\d+)"`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the tour's stats name no sale:\n%s", text)
	}
	return m[1]
}

func TestReadmeTourAgainstDev(t *testing.T) {
	testenv.RedisAddr(t) // dev mode needs nothing, but CI's tools (jq) come with the services
	port := testenv.FreePort(t)
	uiPort := testenv.FreePort(t)
	// README's command, its settings in the environment: every setting is
	// a flag with an environment variable.
	command := strings.Fields(substitute(t, readmeBlockText(t, "The two commands #0"), "go run ./cmd/seckill", ""))
	dev := run(t, "dev", []string{"SECKILL_MEMORY=true", fmt.Sprintf("SECKILL_HTTP_ADDR=127.0.0.1:%d", port),
		"SECKILL_TEMPORAL_PORT=0", fmt.Sprintf("SECKILL_UI_PORT=%d", uiPort), "SECKILL_METRICS_ADDR=127.0.0.1:0"}, command...)
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
	admin := exported(out, "ADMIN_TOKEN")
	sale := runTour(t, api, admin, exported(out, "BUYER_TOKEN"))
	runPagingBlock(t, api, admin, sale)

	code, took := dev.Interrupt()
	if code != 0 || took > 10*time.Second {
		t.Fatalf("seckill dev exited %d after %s on SIGINT, want 0 within 10s", code, took)
	}
}
