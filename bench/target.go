package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/client"
)

// target is the api under test, reached over HTTP with a bounded number
// of connections.

// sampleMemory samples the api's memory through the whole run, if its
// /metrics says (it is on the api's internal listener, which the bench may
// not reach). The returned function stops it and records the peak.
func (c *target) sampleMemory(ctx context.Context, r *Result, progress io.Writer) (stop func()) {
	start, err := c.rss(ctx)
	if err != nil {
		if progress != nil {
			fmt.Fprintf(progress, "api memory not measured: %v\n", err)
		}
		return func() {}
	}
	r.APIMemory.StartMiB = start
	var peak atomic.Uint64
	peak.Store(math.Float64bits(start))
	wctx, stopWatch := context.WithCancel(ctx)
	var watch sync.WaitGroup
	watch.Go(func() { c.watchRSS(wctx, &peak) })
	return func() {
		stopWatch()
		watch.Wait()
		r.APIMemory.PeakMiB = math.Float64frombits(peak.Load())
	}
}

// holdSockets opens one idle result websocket per token and records what
// they cost the api; the returned function closes them.
func (c *target) holdSockets(ctx context.Context, r *Result, tokens []string) (closeAll func(), err error) {
	socks, err := c.openSockets(ctx, tokens, 32)
	if err != nil {
		return nil, err
	}
	// Let the sockets' snapshots finish before reading the cost.
	if err := waitUntil(ctx, time.Now().Add(time.Second)); err != nil {
		socks.close()
		return nil, err
	}
	r.APIMemory.Websockets = len(tokens)
	if after, err := c.rss(ctx); err == nil && r.APIMemory.StartMiB > 0 {
		r.APIMemory.WebsocketsExtraMiB = after - r.APIMemory.StartMiB
	}
	return socks.close, nil
}

// target is the api under load: its REST API, its /metrics and its
// websocket.
type target struct {
	base    string
	metrics string // the api's /metrics URL; "" = unknown
	http    *http.Client
	api     *client.Client // anonymous: WithToken for each buyer
	// pages is a buyer's browser at a payment provider's hosted pages (on
	// the same connections): it stops at a redirect, the way back to the
	// shop being no part of the payment.
	pages *http.Client
}

// newTarget returns a client of the api at base with connections enough
// for concurrency requests in flight.
func newTarget(base string, concurrency int) *target {
	hc := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConns: concurrency * 2, MaxIdleConnsPerHost: concurrency * 2, IdleConnTimeout: time.Minute},
	}
	pages := &http.Client{Timeout: hc.Timeout, Transport: hc.Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &target{base: strings.TrimRight(base, "/"), http: hc, api: client.New(base, "", hc), pages: pages}
}

// answer is what one purchase was told: its outcome's name (ACCEPTED, an
// error code, or HTTP_<status> / TRANSPORT), the order id it named (a
// 202's, or the one an UNCONFIRMED purchase has if it was taken), and
// whether it was a 503, with the Retry-After it gave (0: none).
type answer struct {
	code, orderID string
	unavailable   bool
	retryAfter    time.Duration
}

// purchase buys one unit, with an Idempotency-Key if key is not empty.
func (c *target) purchase(ctx context.Context, saleID, token, key string) answer {
	p, err := c.api.WithToken(token).Purchase(ctx, saleID, key)
	var refused *client.Error
	switch {
	case err == nil:
		return answer{code: "ACCEPTED", orderID: p.OrderID}
	case !errors.As(err, &refused):
		return answer{code: "TRANSPORT"}
	}
	a := answer{code: refused.Problem.Code, orderID: refused.Problem.OrderID,
		unavailable: refused.StatusCode == http.StatusServiceUnavailable, retryAfter: refused.RetryAfter}
	if a.code == "" {
		a.code = fmt.Sprintf("HTTP_%d", refused.StatusCode)
	}
	return a
}

// TargetDatabase is the database the api at target stores its orders in,
// as its /readyz says ("postgres" or "sqlite"; "" if it does not say,
// as builds before the field did not). A 503 of /readyz says it too.
func TargetDatabase(ctx context.Context, target string) string {
	var r struct {
		Database string `json:"database"`
	}
	_, _ = getJSON(ctx, &http.Client{Timeout: 5 * time.Second}, strings.TrimRight(target, "/")+"/readyz", &r)
	return r.Database
}

// saleWorkflowsURL is the Temporal Web UI's list of the sale's order
// workflows, from the api's /v1/info; "" where the deployment names no UI.
func (c *target) saleWorkflowsURL(ctx context.Context, saleID string) string {
	var info struct {
		UI        string `json:"temporal_ui_url"`
		Namespace string `json:"temporal_namespace"`
	}
	if status, err := getJSON(ctx, c.http, c.base+"/v1/info", &info); err != nil || status != http.StatusOK || info.UI == "" {
		return ""
	}
	return fmt.Sprintf("%s/namespaces/%s/workflows?query=%s", strings.TrimRight(info.UI, "/"), url.PathEscape(info.Namespace),
		url.QueryEscape(`SaleId="`+saleID+`"`))
}

// getJSON GETs u and decodes its JSON body into out, whatever the status,
// which it returns.
func getJSON(ctx context.Context, hc *http.Client, u string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

func (c *target) stats(ctx context.Context, saleID, admin string) (Stats, error) {
	st, err := c.api.WithToken(admin).Stats(ctx, saleID)
	return Stats(st), err
}
