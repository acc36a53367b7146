package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
)

// sent is one purchase request as the fake api received it.
type sent struct {
	key string
	at  time.Time
}

// fakeAdmission answers purchases by the buyer's bearer token: answers[tok]
// is the status, problem code, Retry-After and order id of each successive
// request; the last repeats.
type fakeAdmission struct {
	mu      sync.Mutex
	answers map[string][]fakeAnswer
	got     map[string][]sent
}

type fakeAnswer struct {
	status                  int
	code, retryAfter, order string
}

func (f *fakeAdmission) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	n := len(f.got[tok])
	f.got[tok] = append(f.got[tok], sent{key: r.Header.Get("Idempotency-Key"), at: time.Now()})
	list := f.answers[tok]
	a := list[min(n, len(list)-1)]
	f.mu.Unlock()
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	if a.status == http.StatusAccepted {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_ = json.NewEncoder(w).Encode(wire.Purchase{OrderID: a.order})
		return
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": a.status, "code": a.code, "order_id": a.order})
}

func runFakeWave(t *testing.T, f *fakeAdmission, o Options, tokens []string) waveResult {
	t.Helper()
	f.got = map[string][]sent{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	requests := make([]int, len(tokens))
	for i := range requests {
		requests[i] = i
	}
	w, _, err := newTarget(srv.URL, o.Concurrency).wave(context.Background(), o, "1", tokens, requests, "test")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A buyer told 503 resends the same Idempotency-Key after the Retry-After
// the answer asked for (a second when it named none) until a final
// answer; the wave reports the first and last 503, their codes, the
// retries and what each request ended with.
func TestWaveRetriesUnavailableWithTheSameKey(t *testing.T) {
	f := &fakeAdmission{answers: map[string][]fakeAnswer{
		"unsure": {{503, wire.CodeUnconfirmed, "1", "41"}, {503, wire.CodeUnconfirmed, "1", "41"}, {202, "", "", "41"}},
		"down":   {{503, wire.CodeUnavailable, "", ""}, {409, wire.CodeSoldOut, "", ""}},
		"fine":   {{202, "", "", "42"}},
	}}
	w := runFakeWave(t, f, Options{Concurrency: 2, RetryUnavailable: true, RetryFor: time.Minute}, []string{"unsure", "down", "fine"})

	for tok, want := range map[string]int{"unsure": 3, "down": 2, "fine": 1} {
		got := f.got[tok]
		if len(got) != want {
			t.Fatalf("%s sent %d requests, want %d", tok, len(got), want)
		}
		for i, s := range got {
			if s.key == "" || s.key != got[0].key {
				t.Fatalf("%s's request %d had key %q, want the first's %q", tok, i, s.key, got[0].key)
			}
			if i > 0 && s.at.Sub(got[i-1].at) < time.Second {
				t.Fatalf("%s's retry %d came %v after the answer before it, want at least the Retry-After's 1s", tok, i, s.at.Sub(got[i-1].at))
			}
		}
	}
	if f.got["unsure"][0].key == f.got["down"][0].key {
		t.Fatal("two requests shared an Idempotency-Key")
	}
	u := w.unavailable
	if u.Answers[wire.CodeUnconfirmed] != 2 || u.Answers[wire.CodeUnavailable] != 1 || len(u.Answers) != 2 {
		t.Fatalf("503 answers %v, want UNCONFIRMED 2, UNAVAILABLE 1", u.Answers)
	}
	if u.Retries != 3 || u.GaveUp != 0 {
		t.Fatalf("%d retries, %d gave up; want 3 and 0", u.Retries, u.GaveUp)
	}
	// The first 503s answer at once; the last is the second UNCONFIRMED, a
	// Retry-After (and up to a quarter of it) later.
	if u.FirstSeconds > 0.5 || u.SpanSeconds < 1 || u.SpanSeconds > 2 || u.LastSeconds-u.FirstSeconds != u.SpanSeconds {
		t.Fatalf("503 window %.3f s to %.3f s (%.3f s), want from the start, spanning one retry", u.FirstSeconds, u.LastSeconds, u.SpanSeconds)
	}
	if w.outcomes["ACCEPTED"] != 2 || w.outcomes[wire.CodeSoldOut] != 1 || len(w.outcomes) != 2 {
		t.Fatalf("outcomes %v, want each request's final answer: ACCEPTED 2, SOLD_OUT 1", w.outcomes)
	}
	if w.accepted["41"] != "unsure" || w.accepted["42"] != "fine" || len(w.unconfirmed) != 0 {
		t.Fatalf("accepted %v, unconfirmed %v; want 41 and 42 accepted, none unconfirmed", w.accepted, w.unconfirmed)
	}
}

// A retry that would be sent past RetryFor is not sent: the buyer gives
// up with the 503 as their answer, and one left UNCONFIRMED is kept with
// the order they would have. Without RetryUnavailable no key is sent and
// nothing is retried, but the 503s are still counted.
func TestWaveGivesUpPastRetryFor(t *testing.T) {
	stuck := map[string][]fakeAnswer{
		"stuck":  {{503, wire.CodeUnavailable, "1", ""}},
		"unsure": {{503, wire.CodeUnconfirmed, "1", "43"}},
		"fine":   {{202, "", "", "42"}},
	}
	for name, o := range map[string]Options{
		"retry for 100ms": {Concurrency: 2, RetryUnavailable: true, RetryFor: 100 * time.Millisecond},
		"no retry":        {Concurrency: 2},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeAdmission{answers: stuck}
			w := runFakeWave(t, f, o, []string{"stuck", "unsure", "fine"})
			for _, tok := range []string{"stuck", "unsure"} {
				if n := len(f.got[tok]); n != 1 {
					t.Fatalf("%s sent %d requests, want 1", tok, n)
				}
				if key := f.got[tok][0].key; (key != "") != o.RetryUnavailable {
					t.Fatalf("Idempotency-Key %q with RetryUnavailable %v", key, o.RetryUnavailable)
				}
			}
			u := w.unavailable
			wantGaveUp := 0
			if o.RetryUnavailable {
				wantGaveUp = 2
			}
			if u.Answers[wire.CodeUnavailable] != 1 || u.Answers[wire.CodeUnconfirmed] != 1 || u.Retries != 0 || u.GaveUp != wantGaveUp {
				t.Fatalf("503s %v, %d retries, %d gave up; want UNAVAILABLE 1, UNCONFIRMED 1, 0 retries, %d gave up",
					u.Answers, u.Retries, u.GaveUp, wantGaveUp)
			}
			if w.outcomes[wire.CodeUnavailable] != 1 || w.outcomes[wire.CodeUnconfirmed] != 1 || w.outcomes["ACCEPTED"] != 1 {
				t.Fatalf("outcomes %v", w.outcomes)
			}
			if len(w.unconfirmed) != 1 || w.unconfirmed["43"] != "unsure" {
				t.Fatalf("unconfirmed %v, want order 43 of unsure", w.unconfirmed)
			}
		})
	}
}

// A purchase left UNCONFIRMED whose order is there once nothing is on its
// way held its unit; one whose order is not (404) did not. The units
// unsold are the stock less both kinds of sale.
func TestCountHeld(t *testing.T) {
	signer, err := auth.NewSigner("verify-secret-verify-secret-verify-secret")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/orders/43" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"status":404,"code":"NOT_FOUND"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"43","status":"PENDING"}`))
	}))
	defer srv.Close()
	o := Options{Target: srv.URL, Signer: signer, Concurrency: 2, AdmissionOnly: true}
	r := &Result{Stock: 5, Accepted: 1, Unavailable: &Unavailable{}}
	err = newTarget(srv.URL, 2).countHeld(context.Background(), r, o, "1", "", map[string]string{"43": "tok-a", "44": "tok-b"},
		map[string]string{"tok-a": "a", "tok-b": "b"})
	if err != nil || r.HeldUnconfirmed != 1 || r.orders() != 2 || r.Unavailable.UnitsUnsold != 3 {
		t.Fatalf("held %d, orders %d, unsold %d, %v; want 1 held (order 43 there, 44 not), 2 orders, 3 unsold",
			r.HeldUnconfirmed, r.orders(), r.Unavailable.UnitsUnsold, err)
	}
}
