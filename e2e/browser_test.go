package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/internal/testenv"
)

// chromiumPath finds Debian's chromium; without it the test skips, or fails
// when the services are required (CI installs it, see .ci/run).
func chromiumPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err == nil {
		return p
	}
	if os.Getenv("SECKILL_REQUIRE_SERVICES") == "1" {
		t.Fatalf("chromium is required (SECKILL_REQUIRE_SERVICES=1) but not installed: %v; run the tests through .ci/run", err)
	}
	t.Skipf("chromium not installed (%v); run the tests through .ci/run", err)
	return ""
}

// browser is one headless chromium tab with helpers that fail the test with
// a screenshot and the page's text.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string
	n   int

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	dir := os.Getenv("SECKILL_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	profile := t.TempDir()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancelTab := chromedp.NewContext(actx)
	// The profile directory goes after the browser has exited (cleanups run
	// last in, first out).
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, dir: dir}
	messages := chromedp.Console(ctx) // starts the browser
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
	b.do("start chromium", 30*time.Second, chromedp.EmulateViewport(1280, 900))
	return b
}

// do runs steps, failing the test if they do not finish within timeout.
func (b *browser) do(what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail(what, err)
	}
}

// value runs a that returns a value.
func value[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fail(what, err)
	}
	return v
}

// until waits for a JavaScript condition on the page to become true.
func (b *browser) until(what string, timeout time.Duration, cond string) {
	b.t.Helper()
	b.do(what, timeout+time.Second, chromedp.Poll[chromedp.Void](cond,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
}

func (b *browser) fail(what string, err error) {
	b.t.Helper()
	b.screenshot("failed")
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	b.logConsole()
	b.t.Fatalf("%s: %v\n--- page text ---\n%s", what, err, text)
}

// screenshot saves a PNG of the whole page as NN-name.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	b.n++
	file := filepath.Join(b.dir, fmt.Sprintf("%02d-%s.png", b.n, name))
	if err := os.WriteFile(file, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", file)
}

func (b *browser) logConsole() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.console {
		b.t.Logf("browser console: %s (%s:%d)", m, m.URL, m.Line)
	}
}

// errors are the uncaught exceptions and console errors so far, such as a
// blocked script or style (CSP).
func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.console {
		// The network's log reports each 4xx answer; the page expects some
		// (409 SOLD_OUT) and shows them.
		if m.IsException() || m.Type == chromedp.ConsoleError && m.Source != "network" {
			out = append(out, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
		}
	}
	return out
}

// step runs one part of a story as a subtest, failing it through b; a failed
// step ends the story, since every later one builds on it.
func (b *browser) step(t *testing.T, name string, fn func(t *testing.T)) {
	t.Helper()
	ok := t.Run(name, func(st *testing.T) {
		parent := b.t
		b.t = st
		defer func() { b.t = parent }()
		fn(st)
	})
	if !ok {
		t.FailNow()
	}
}

// purchase is one POST /v1/sales/{id}/orders the page sent, as the
// browser's network saw it.
type purchase struct {
	id     network.RequestID
	key    string // its Idempotency-Key
	status int64
	body   struct {
		Code    string `json:"code"`
		OrderID string `json:"order_id"`
	}
}

// watchPurchases records the purchases the page sends from now until the
// step ends; the function it returns lists them with their answers.
func (b *browser) watchPurchases(t *testing.T) func() []purchase {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	t.Cleanup(cancel)
	var (
		mu  sync.Mutex
		all []*purchase
	)
	isPurchase := regexp.MustCompile(`/v1/sales/\d+/orders$`)
	err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			if ev.Request.Method == http.MethodPost && isPurchase.MatchString(ev.Request.URL) {
				key, _ := ev.Request.Headers["Idempotency-Key"].(string)
				all = append(all, &purchase{id: ev.RequestID, key: key})
			}
		case *network.EventResponseReceived:
			for _, p := range all {
				if p.id == ev.RequestID {
					p.status = ev.Response.Status
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return func() []purchase {
		t.Helper()
		mu.Lock()
		out := make([]purchase, len(all))
		for i, p := range all {
			out[i] = *p
		}
		mu.Unlock()
		for i := range out {
			res, err := chromedp.Call(b.ctx, network.GetResponseBody, network.GetResponseBodyParams{RequestID: out[i].id})
			if err != nil {
				t.Fatalf("the body of purchase %d: %v", i+1, err)
			}
			if err := json.Unmarshal(res.Body, &out[i].body); err != nil {
				t.Fatalf("the body of purchase %d: %v: %s", i+1, err, res.Body)
			}
		}
		return out
	}
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestDemoPage drives the demo page in a real browser against `seckill dev`:
// countdown, buy, the result pushed over the websocket, pay, the error
// messages, the operator view and the link to the order's workflow.
func TestDemoPage(t *testing.T) {
	testenv.RedisAddr(t) // dev mode needs nothing, but CI's tools come with the services
	chromiumPath(t)
	port, uiPort := testenv.FreePort(t), testenv.FreePort(t)
	// The relay holds each intent it reads for a while before starting its
	// workflow, so a buyer's order waits in line long enough for the page
	// to show its place (the websocket's refresh comes every 3s).
	// The secret lets the test mint a short-lived token (step 10). The
	// first reservation fails right after it took the unit (step 4).
	run(t, "dev", []string{"SECKILL_JWT_SECRET=" + secret, "SECKILL_FAULTS=purchase.reserve=error:1"}, "dev", "--memory", "--http-addr", fmt.Sprintf("127.0.0.1:%d", port),
		"--temporal-port=0", fmt.Sprintf("--ui-port=%d", uiPort), "--relay-start-delay=6s")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	b := newBrowser(t) // chromium starts while seckill dev does
	waitReady(t, base+"/readyz", 60*time.Second)

	// What the steps hand on to each other.
	var (
		info struct {
			TemporalUIURL     string `json:"temporal_ui_url"`
			TemporalNamespace string `json:"temporal_namespace"`
			DevMode           bool   `json:"dev_mode"`
		}
		startsAt            time.Time
		card, buyBtn, stats string // CSS selectors of the sale
		first               string // the first buyer
		order, row, link    string // the first buyer's order
	)

	// The page sits beside the API; the API's own routes still answer.
	b.step(t, "page and API are served", func(t *testing.T) {
		for path, want := range map[string]string{
			"/":             "text/html",
			"/app.js":       "text/javascript",
			"/style.css":    "text/css",
			"/docs":         "text/html",
			"/openapi.json": "application/",
			"/v1/info":      "application/json",
			"/v1/sales":     "application/json",
			"/healthz":      "application/json",
		} {
			resp, err := http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, want) {
				t.Errorf("GET %s: %d %q, want 200 %s…", path, resp.StatusCode, ct, want)
			}
		}
		// The metrics are on the process's own listener, not beside the page.
		if resp, err := http.Get(base + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /metrics on the api's port: %v %v, want 404", resp, err)
		} else {
			resp.Body.Close()
		}
		if !strings.Contains(get(t, base+"/openapi.json"), `"/v1/sales/{id}/orders"`) {
			t.Error("/openapi.json lacks the purchase route")
		}
		if err := json.Unmarshal([]byte(get(t, base+"/v1/info")), &info); err != nil || !info.DevMode || info.TemporalUIURL == "" {
			t.Fatalf("/v1/info: %+v %v", info, err)
		}
	})

	// An operator opens a sale of exactly one unit, five seconds from now.
	b.step(t, "operator opens a one-unit sale", func(t *testing.T) {
		var admin struct{ Token string }
		if st := call(t, "POST", base+"/v1/dev/token", "", map[string]string{"user_id": "e2e-operator", "role": "admin"}, &admin); st != http.StatusOK {
			t.Fatalf("dev token: %d", st)
		}
		startsAt = time.Now().Add(5 * time.Second)
		var sale struct{ ID string }
		if st := call(t, "POST", base+"/v1/sales", admin.Token, map[string]any{
			"name": "Browser phone", "price_cents": 129900, "currency": "EUR", "stock": 1,
			"starts_at": startsAt, "ends_at": startsAt.Add(time.Hour),
		}, &sale); st != http.StatusCreated {
			t.Fatalf("create sale: %d", st)
		}
		card = fmt.Sprintf(`.sale[data-sale-id="%s"]`, sale.ID)
		buyBtn = card + ` button[data-action="buy"]`
		stats = fmt.Sprintf(`[data-stats-sale-id="%s"]`, sale.ID)
	})

	// 1. The page lists the sale with its countdown.
	b.step(t, "1 the page counts down", func(t *testing.T) {
		b.do("open the page", 20*time.Second, chromedp.Navigate(base+"/"))
		// The script is ES modules, app.js and what it imports: the page
		// is ready only once every one of them loaded and ran.
		b.until("the page's modules loaded and ran", 10*time.Second, `document.body.dataset.ready === "true"`)
		modules := value(b, "the modules the page loaded", chromedp.Evaluate[[]string](`performance.getEntriesByType("resource")
			.filter((e) => new URL(e.name).pathname.endsWith(".js"))
			.map((e) => new URL(e.name).pathname + " " + e.responseStatus)`))
		if len(modules) < 2 || !slices.Contains(modules, "/app.js 200") {
			t.Errorf("the page loaded the scripts %q, want app.js and its modules", modules)
		}
		for _, m := range modules {
			if !strings.HasSuffix(m, " 200") {
				t.Errorf("the page's module %s, want 200", m)
			}
		}
		b.do("the sale's card", 20*time.Second, chromedp.WaitVisible(chromedp.CSS(card+`[data-state="upcoming"]`)))
		countdown := value(b, "countdown", chromedp.Text(chromedp.CSS(card+` .countdown`)))
		if !strings.HasPrefix(countdown, "Starts in 00:0") {
			t.Fatalf("countdown %q, want Starts in 00:0…", countdown)
		}
		// The price in its currency, as the reader's locale writes it.
		if price := value(b, "price", chromedp.Text(chromedp.CSS(card+` .price`))); !strings.Contains(price, "€") || !strings.Contains(strings.NewReplacer(",", "", ".", "", " ", "", "\u00a0", "", "\u202f", "").Replace(price), "129900") {
			t.Errorf("the sale's price reads %q, want 1,299.00 in euros", price)
		}
		b.until("the countdown ticks", 3*time.Second,
			`(t => t.startsWith("Starts in 00:0") && t !== `+js(countdown)+`)(document.querySelector(`+js(card+` .countdown`)+`).textContent)`)
		// Nobody is signed in yet: the live pill says why nothing is live,
		// not "offline", which reads as a fault.
		if live := value(b, "live pill", chromedp.Text(chromedp.CSS(`#live`))); live != "no live updates until you sign in" {
			t.Errorf("signed out, the live pill says %q", live)
		}
		// A marker that a reload would wipe out.
		b.do("mark the page", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.e2eNoReload = "still here"`))
		b.screenshot("countdown")
	})

	// 2. New buyer: a dev token, and the websocket opens.
	b.step(t, "2 new buyer and operator view", func(t *testing.T) {
		b.do("new buyer", 10*time.Second,
			chromedp.Click(chromedp.CSS(`#new-buyer`)),
			chromedp.WaitVisible(chromedp.CSS(`#live[data-state="open"]`)))
		first = value(b, "buyer id", chromedp.AttributeValue(chromedp.CSS(`#whoami`), "data-user-id")).Value
		if !strings.HasPrefix(first, "buyer-") {
			t.Fatalf("after New buyer, #whoami says user %q", first)
		}
		// The operator watches too: the stats of the sale, live, beside the shop.
		b.do("become admin", 10*time.Second,
			chromedp.Click(chromedp.CSS(`#become-admin`)),
			chromedp.WaitVisible(chromedp.CSS(`#operator`)),
			chromedp.WaitVisible(chromedp.CSS(stats+` dd[data-metric="redis_remaining"]`)))
		b.until("the stats arrive", 5*time.Second,
			`document.querySelector(`+js(stats+` dd[data-metric="redis_remaining"]`)+`).textContent === "1"`)
		b.screenshot("new-buyer-and-operator")
	})

	// 3. The countdown reaches the start and the Buy button opens.
	b.step(t, "3 the sale opens", func(t *testing.T) {
		b.do("the sale opens", 15*time.Second,
			chromedp.WaitVisible(chromedp.CSS(card+`[data-state="active"]`)),
			chromedp.WaitEnabled(chromedp.CSS(buyBtn)))
		if early := time.Until(startsAt); early > 300*time.Millisecond {
			t.Fatalf("the Buy button opened %s before the sale starts", early)
		}
	})

	// 4. Buy: PENDING at once, its place in line while the relay holds
	// it, AWAITING_PAYMENT pushed over the websocket. The reservation is
	// made but not confirmed (purchase.reserve armed for the first hit):
	// the api answers 503 UNCONFIRMED, and the page asks again with the
	// same Idempotency-Key, which finds the unit taken and answers 202.
	b.step(t, "4 buy", func(t *testing.T) {
		pending := `#orders li[data-status="PENDING"] .order-line`
		purchases := b.watchPurchases(t)
		b.do("buy", 5*time.Second, chromedp.Click(chromedp.CSS(buyBtn)))
		b.until("the page says it is checking an unconfirmed purchase", 5*time.Second,
			`(m => m.dataset.code === "UNCONFIRMED" && !m.hidden &&
			m.querySelector(".message-text").textContent.startsWith("Not confirmed yet: checking whether order ") &&
			document.querySelector(`+js(buyBtn)+`).disabled)(document.querySelector("#message"))`)
		b.do("the retry places the order", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(pending)))
		got := purchases()
		if len(got) != 2 || got[0].status != http.StatusServiceUnavailable || got[1].status != http.StatusAccepted {
			t.Fatalf("purchase requests %+v, want a 503 then a 202", got)
		}
		if got[0].key == "" || got[1].key != got[0].key {
			t.Fatalf("Idempotency-Keys %q then %q, want one key sent twice", got[0].key, got[1].key)
		}
		if got[0].body.Code != "UNCONFIRMED" || got[0].body.OrderID == "" || got[1].body.OrderID != got[0].body.OrderID {
			t.Fatalf("answers %+v then %+v, want UNCONFIRMED naming the order the 202 then gives", got[0].body, got[1].body)
		}
		if row := fmt.Sprintf(`#orders li[data-order-id="%s"]`, got[1].body.OrderID); !value(b, "the order's row", chromedp.Evaluate[bool](`!!document.querySelector(`+js(row)+`)`)) {
			t.Fatalf("the page lists no row for order %s", got[1].body.OrderID)
		}
		// The only order of the sale is first, and nothing has left the
		// line yet to estimate a wait from.
		if line := value(b, "place in line", chromedp.Text(chromedp.CSS(pending))); line != "You are #1 in line" {
			t.Errorf("a PENDING order shows %q, want %q", line, "You are #1 in line")
		}
		if msg := value(b, "message", chromedp.Text(chromedp.CSS(`#message .message-text`))); !strings.Contains(msg, "is being placed") {
			t.Errorf("the message after a 202 is %q", msg)
		}
		b.screenshot("in-line")
		b.do("the order is placed", 30*time.Second,
			chromedp.WaitVisible(chromedp.CSS(`#orders li[data-status="AWAITING_PAYMENT"]`)))
		// "Being placed" is no longer true: the message gives way.
		b.until("the placing message is gone", 5*time.Second, `document.querySelector("#message").hidden`)
		if line := value(b, "place in line", chromedp.Text(chromedp.CSS(`#orders li[data-status="AWAITING_PAYMENT"] .order-line`))); line != "" {
			t.Errorf("an order awaiting payment shows %q", line)
		}
		order = value(b, "order id", chromedp.AttributeValue(chromedp.CSS(`#orders li[data-status="AWAITING_PAYMENT"]`), "data-order-id")).Value
		if !regexp.MustCompile(`^\d+$`).MatchString(order) {
			t.Fatalf("order id %q", order)
		}
		row = fmt.Sprintf(`#orders li[data-order-id="%s"]`, order)
		if via := value(b, "order source", chromedp.AttributeValue(chromedp.CSS(row), "data-via")).Value; via != "ws" {
			t.Errorf("AWAITING_PAYMENT came from %q, want the websocket", via)
		}
		b.screenshot("awaiting-payment")
	})

	// 5. Pay: the buyer goes to the built-in provider's page, pays there,
	// and comes back to the demo page, where the order turns PAID live.
	b.step(t, "5 pay", func(t *testing.T) {
		if got, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`window.e2eNoReload || ""`)); got != "still here" {
			t.Fatalf("the page reloaded before paying (marker %q)", got)
		}
		// The operator's chart drew the purchase (it starts afresh with
		// the page, which the way to the provider and back loads again).
		b.until("the chart shows the purchase", 5*time.Second,
			`parseFloat(document.querySelector(`+js(stats)+`).dataset.peak) > 0`)
		b.do("pay", 30*time.Second,
			chromedp.Click(chromedp.CSS(row+` button[data-action="pay"]`)),
			chromedp.WaitVisible(chromedp.CSS(`form button[value="pay"]`)))
		if page := value(b, "the provider's page", chromedp.Location()); !strings.HasPrefix(page, base+"/pay/checkout/") {
			t.Fatalf("pay led to %q, want the built-in provider's page under %s/pay/checkout/", page, base)
		}
		if amount := value(b, "amount", chromedp.Text(chromedp.CSS(`.amount`))); amount != "1299.00 EUR" {
			t.Errorf("the provider's page asks for %q, want the sale's price", amount)
		}
		b.screenshot("provider-page")
		b.do("pay on the provider's page", 30*time.Second,
			chromedp.Click(chromedp.CSS(`form button[value="pay"]`)),
			chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)),
			chromedp.WaitVisible(chromedp.CSS(row+`[data-status="PAID"]`)),
			chromedp.WaitVisible(chromedp.CSS(card+`[data-remaining="0"]`)))
		if msg := value(b, "message", chromedp.Text(chromedp.CSS(`#message .message-text`))); !strings.Contains(msg, "Back from the payment page") || !strings.Contains(msg, order) {
			t.Errorf("message after the provider's page %q", msg)
		}
		if back := value(b, "back at the shop", chromedp.Location()); back != base+"/" {
			t.Errorf("back at %q, want %s/ with the provider's query taken out", back, base)
		}
		// The page was loaded again on the way back: mark it anew.
		b.do("mark the page", 5*time.Second, chromedp.Evaluate[chromedp.Void](`window.e2eNoReload = "still here"`))
		link = value(b, "workflow link", chromedp.AttributeValue(chromedp.CSS(row+` a.workflow-link`), "href")).Value
		if want := fmt.Sprintf("%s/namespaces/%s/workflows/order-%s", strings.TrimRight(info.TemporalUIURL, "/"), info.TemporalNamespace, order); link != want {
			t.Errorf("workflow link %q, want %q", link, want)
		}
		b.screenshot("paid")
	})

	// 6. The same buyer again: one unit per buyer.
	b.step(t, "6 one unit per buyer", func(t *testing.T) {
		b.do("buy again", 10*time.Second,
			chromedp.Click(chromedp.CSS(buyBtn)),
			chromedp.WaitVisible(chromedp.CSS(`#message[data-code="ALREADY_PURCHASED"]`)))
		if msg := value(b, "message", chromedp.Text(chromedp.CSS(`#message .message-text`))); !strings.Contains(msg, "already") || !strings.Contains(msg, order) {
			t.Errorf("ALREADY_PURCHASED message %q", msg)
		}
		b.screenshot("already-purchased")
	})

	// 7. A second buyer finds the sale sold out.
	b.step(t, "7 second buyer finds it sold out", func(t *testing.T) {
		b.do("second buyer", 10*time.Second, chromedp.Click(chromedp.CSS(`#new-buyer`)))
		b.until("the second buyer is signed in", 10*time.Second,
			`(u => u.startsWith("buyer-") && u !== `+js(first)+`)(document.querySelector("#whoami").dataset.userId)`)
		b.do("second buyer buys", 10*time.Second,
			chromedp.WaitVisible(chromedp.CSS(`#orders-empty`)),
			chromedp.Click(chromedp.CSS(buyBtn)),
			chromedp.WaitVisible(chromedp.CSS(`#message[data-code="SOLD_OUT"]`)))
		if msg := value(b, "message", chromedp.Text(chromedp.CSS(`#message .message-text`))); !strings.Contains(strings.ToLower(msg), "sold out") {
			t.Errorf("SOLD_OUT message %q", msg)
		}
		b.screenshot("sold-out")
	})

	// 8. The operator view counted the sale (its chart drew the purchase: step 5).
	b.step(t, "8 operator view", func(t *testing.T) {
		b.do("operator stats", 15*time.Second, chromedp.WaitVisible(chromedp.CSS(stats+`[data-paid="1"]`)))
		for metric, want := range map[string]string{"redis_remaining": "0", "db_stock": "0", "stock": "1", "relay_backlog": "0"} {
			if got := value(b, metric, chromedp.Text(chromedp.CSS(stats+` dd[data-metric="`+metric+`"]`))); got != want {
				t.Errorf("operator view: %s = %q, want %q", metric, got, want)
			}
		}
		// It lists the sale's orders, filters them by status and downloads
		// them as CSV.
		orders := stats + ` [data-sale-orders]`
		b.do("list the sale's orders", 15*time.Second,
			chromedp.Click(chromedp.CSS(stats+` button[data-action="sale-orders"]`)),
			chromedp.WaitVisible(chromedp.CSS(orders+`[data-rows="1"][data-complete="true"] li[data-order-id="`+order+`"][data-status="PAID"]`)))
		b.do("only the cancelled orders", 15*time.Second,
			chromedp.SetValue(chromedp.CSS(stats+` select.orders-filter`), "CANCELLED"),
			chromedp.Evaluate[chromedp.Void](`document.querySelector(`+js(stats+` select.orders-filter`)+`).dispatchEvent(new Event("change"))`))
		b.until("no cancelled order", 10*time.Second,
			`(b => b.dataset.filter === "CANCELLED" && b.dataset.rows === "0" && b.dataset.complete === "true" && !b.querySelector("li"))(document.querySelector(`+js(orders)+`))`)
		b.do("only the paid orders", 15*time.Second,
			chromedp.SetValue(chromedp.CSS(stats+` select.orders-filter`), "PAID"),
			chromedp.Evaluate[chromedp.Void](`document.querySelector(`+js(stats+` select.orders-filter`)+`).dispatchEvent(new Event("change"))`),
			chromedp.WaitVisible(chromedp.CSS(orders+`[data-filter="PAID"][data-rows="1"] li[data-order-id="`+order+`"]`)),
			chromedp.Click(chromedp.CSS(stats+` button[data-action="export-csv"]`)),
			chromedp.WaitVisible(chromedp.CSS(orders+`[data-export-rows="1"]`)))
		b.screenshot("operator-orders")
		// It creates a sale with its form.
		b.do("create a sale with the form", 15*time.Second,
			chromedp.SetValue(chromedp.CSS(`#create-sale input[name="name"]`), "Form phone"),
			chromedp.SetValue(chromedp.CSS(`#create-sale input[name="stock"]`), "7"),
			chromedp.SetValue(chromedp.CSS(`#create-sale input[name="starts_in"]`), "120"),
			chromedp.Click(chromedp.CSS(`#create-sale button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS(`.sale[data-state="upcoming"][data-remaining="7"]`)))
		b.until("the form's sale is listed", 5*time.Second,
			`[...document.querySelectorAll(".sale .sale-name")].some(e => e.textContent === "Form phone")`)
		b.until("the operator view follows the form's sale", 5*time.Second,
			`[...document.querySelectorAll("[data-stats-sale-id]")].some(c =>
			c.querySelector(".sale-name").textContent === "Form phone" &&
			c.querySelector('dd[data-metric="redis_remaining"]').textContent === "7")`)
		b.screenshot("operator")
	})

	// The same page on a phone, with and without the operator view.
	b.step(t, "the page fits a phone", func(t *testing.T) {
		b.do("phone viewport", 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
		b.until("the page fits the phone", 5*time.Second, `document.documentElement.scrollWidth <= 390`)
		b.screenshot("phone-operator")
		b.do("close the operator view", 10*time.Second,
			chromedp.Click(chromedp.CSS(`#operator-toggle`)),
			chromedp.WaitNotVisible(chromedp.CSS(`#operator`)))
		b.until("the page fits the phone", 5*time.Second, `document.documentElement.scrollWidth <= 390`)
		b.screenshot("phone")
		b.do("desktop viewport", 10*time.Second, chromedp.EmulateViewport(1280, 900))
	})

	b.step(t, "no errors on the page", func(t *testing.T) {
		if errs := b.errors(); len(errs) > 0 {
			b.logConsole()
			t.Errorf("the page logged errors:\n%s", strings.Join(errs, "\n"))
		}
	})

	// 9. The order's link opens its workflow in the Temporal Web UI.
	b.step(t, "9 the workflow in the Temporal Web UI", func(t *testing.T) {
		b.do("open the workflow", 30*time.Second, chromedp.Navigate(link))
		b.until("the workflow page shows the order", 30*time.Second,
			`document.body && document.body.innerText.includes(`+js("order-"+order)+`)`)
		b.screenshot("temporal-workflow")
	})

	// 10. The server closes a socket when its token expires (4001); the
	// page gets a fresh token for the same buyer and is live again.
	b.step(t, "10 an expired token is renewed", func(t *testing.T) {
		signer, err := auth.NewSigner(secret)
		if err != nil {
			t.Fatal(err)
		}
		const buyer = "e2e-brief"
		short, err := signer.Mint(buyer, auth.RoleBuyer, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ident, _ := json.Marshal(map[string]string{"token": short, "user_id": buyer, "role": auth.RoleBuyer})
		b.do("sign in with a token about to expire", 20*time.Second,
			chromedp.Navigate(base+"/"),
			chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem("seckill.buyer", `+js(string(ident))+`)`),
			chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(`#whoami[data-user-id="`+buyer+`"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#live[data-state="open"]`)))
		b.until("the page renewed the token and is live again", 15*time.Second,
			`(b => b && b.user_id === `+js(buyer)+` && b.token !== `+js(short)+` &&
			document.querySelector("#live").dataset.state === "open")(JSON.parse(sessionStorage.getItem("seckill.buyer") || "null"))`)
	})

	// 11. The API reference renders from the binary alone: the machine has
	// no way out, as a reader offline has none.
	b.step(t, "11 the API reference works offline", func(t *testing.T) {
		b.do("open /docs", 20*time.Second, chromedp.Navigate(base+"/docs"))
		b.until("the reference shows the API and its schemas", 30*time.Second,
			`document.body && document.body.innerText.includes("Flash sales: a buyer's purchase") && document.body.innerText.includes("CreateSaleBody")`)
		b.screenshot("docs")
	})
}
