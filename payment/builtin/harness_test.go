package builtin

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/payment"
)

const (
	testSecretKey     = "sk_test_0123456789abcdef"
	testWebhookSecret = "whsec_test_fedcba9876543210"
)

// eachDB runs test against Postgres and against SQLite, the two databases
// the service lives in (a server's, and seckill dev's).
func eachDB(t *testing.T, test func(t *testing.T, db *sql.DB)) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		db, err := sql.Open("postgres", testenv.DatabaseURL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		test(t, db)
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		test(t, openSQLite(t, filepath.Join(t.TempDir(), "pay.db")))
	})
}

// openSQLite opens a file database as seckill dev's store does: one
// connection, WAL, immediate transactions.
func openSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// clock is the service's clock in the tests: real time plus what the test
// advanced it by.
type clock struct {
	mu   sync.Mutex
	skew time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.skew)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.skew += d
	c.mu.Unlock()
}

// delivery is one notification the webhook receiver took.
type delivery struct {
	event payment.Event
	err   error // Verify's refusal
}

// harness is a service on an httptest server, its client, and a webhook
// receiver that verifies each notification with the client.
type harness struct {
	t      *testing.T
	db     *sql.DB
	clock  *clock
	svc    *Service
	srv    *httptest.Server
	client *Client
	hook   *httptest.Server
	// failFirst: the receiver answers 500 to this many deliveries first;
	// attempts counts every delivery it saw.
	failFirst  atomic.Int64
	attempts   atomic.Int64
	deliveries chan delivery
	logs       *testenv.SyncBuffer
	stop       func() // stops Run and waits for it
}

type options struct {
	noControls bool
	noRun      bool
}

func newHarness(t *testing.T, db *sql.DB, opts ...func(*options)) *harness {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	h := &harness{t: t, db: db, clock: &clock{}, deliveries: make(chan delivery, 256), logs: &testenv.SyncBuffer{}}
	h.hook = httptest.NewServer(http.HandlerFunc(h.receive))
	t.Cleanup(h.hook.Close)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.svc.ServeHTTP(w, r) }))
	t.Cleanup(h.srv.Close)
	h.start(!o.noControls, !o.noRun)
	client, err := NewClient(ClientConfig{BaseURL: h.srv.URL + "/pay/", SecretKey: testSecretKey, WebhookSecret: testWebhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	h.client = client
	return h
}

// start makes a new Service over the harness's database (a restart, the
// second time) and runs its sender unless run is false.
func (h *harness) start(controls, run bool) {
	h.t.Helper()
	svc, err := New(Config{
		DB: h.db, Prefix: "/pay/", BaseURL: h.srv.URL, SecretKey: testSecretKey,
		WebhookURL: h.hook.URL + "/hook", WebhookSecret: testWebhookSecret,
		RetryMin: 5 * time.Millisecond, RetryMax: 40 * time.Millisecond, Poll: 20 * time.Millisecond,
		Controls: controls, Now: h.clock.Now,
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := svc.Migrate(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.svc = svc
	h.stop = func() {}
	if !run {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("Run: %v", err)
			}
		})
	}
	h.t.Cleanup(h.stop)
}

func (h *harness) receive(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.attempts.Add(1)
	if h.failFirst.Add(-1) >= 0 {
		http.Error(w, "receiver down", http.StatusInternalServerError)
		return
	}
	ev, err := h.client.Verify(r.Header, body, time.Now())
	h.deliveries <- delivery{event: ev, err: err}
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// next returns the next notification the receiver verified.
func (h *harness) next() payment.Event {
	h.t.Helper()
	select {
	case d := <-h.deliveries:
		if d.err != nil {
			h.t.Fatalf("a notification did not verify: %v", d.err)
		}
		return d.event
	case <-time.After(10 * time.Second):
		h.t.Fatal("no notification within 10 s")
	}
	return payment.Event{}
}

// expectEvent takes the next notification and checks what it says.
func (h *harness) expectEvent(paymentID string, state payment.State) payment.Event {
	h.t.Helper()
	ev := h.next()
	if ev.Payment.ID != paymentID || ev.Payment.State != state {
		h.t.Fatalf("notification about %s %s, want %s %s", ev.Payment.ID, ev.Payment.State, paymentID, state)
	}
	return ev
}

// noMoreEvents checks that nothing else arrived by now.
func (h *harness) noMoreEvents() {
	h.t.Helper()
	select {
	case d := <-h.deliveries:
		h.t.Fatalf("unexpected notification: %+v %v", d.event, d.err)
	default:
	}
}

var orderSeq atomic.Int64

func (h *harness) createRequest() payment.CreateRequest {
	order := 1_000_000 + orderSeq.Add(1)
	return payment.CreateRequest{
		OrderID: order, SaleID: 7, UserID: "buyer-1",
		Amount:    payment.Money{Minor: 1999, Currency: "USD"},
		Key:       fmt.Sprintf("order-%d-attempt-1", order),
		ReturnURL: "http://shop.example/orders/1?from=pay",
		ExpiresAt: h.clock.Now().Add(10 * time.Minute),
	}
}

func (h *harness) create() payment.Payment {
	h.t.Helper()
	p, err := h.client.Create(context.Background(), h.createRequest())
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

var tokenRE = regexp.MustCompile(`name="token" value="([^"]+)"`)

// page is the hosted page as a buyer's browser gets it.
type page struct {
	status int
	header http.Header
	body   string
	token  string
}

// noRedirects is a browser that shows where it is sent instead of going.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (h *harness) page(p payment.Payment) page {
	h.t.Helper()
	resp, err := noRedirects.Get(p.RedirectURL)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	pg := page{status: resp.StatusCode, header: resp.Header, body: string(b)}
	if m := tokenRE.FindStringSubmatch(pg.body); m != nil {
		pg.token = m[1]
	}
	return pg
}

// press submits the page's form with a button; it returns the answer.
func (h *harness) press(p payment.Payment, token, action string) *http.Response {
	h.t.Helper()
	resp, err := noRedirects.PostForm(p.RedirectURL, url.Values{"token": {token}, "action": {action}})
	if err != nil {
		h.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp
}

// pay takes payment p through the hosted page: the page, then Pay.
func (h *harness) pay(p payment.Payment) {
	h.t.Helper()
	pg := h.page(p)
	if pg.status != http.StatusOK || pg.token == "" {
		h.t.Fatalf("pay page: %d, token %q\n%s", pg.status, pg.token, pg.body)
	}
	if resp := h.press(p, pg.token, "pay"); resp.StatusCode != http.StatusSeeOther {
		h.t.Fatalf("pay: %s", resp.Status)
	}
}

func (h *harness) get(id string) payment.Payment {
	h.t.Helper()
	p, err := h.client.Get(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// apiCall calls the service's API as a raw HTTP client.
func (h *harness) apiCall(method, path, key, body string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+"/pay/api/"+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// apiCode is the stable code of the APIError err wraps.
func apiCode(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}
