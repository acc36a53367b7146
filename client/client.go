// Package client is a typed Go client of seckill's REST API and of the
// buyer's websocket. It speaks the wire types of package wire, the ones
// the api's handlers use, so the two cannot drift.
//
// A refusal comes back as an *Error carrying the HTTP status and the
// decoded problem; branch on its code:
//
//	_, err := c.Purchase(ctx, saleID, "")
//	var e *client.Error
//	if errors.As(err, &e) && e.Problem.Code == wire.CodeAlreadyPurchased {
//		// e.Problem.OrderID is the buyer's existing order
//	}
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/api/wire"
)

// Client calls one api as one user (its bearer token). It is safe for
// concurrent use.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// New returns a client of the api at baseURL (http://host:port) that
// authenticates with token (empty: anonymous) and sends its requests
// through hc (nil: http.DefaultClient).
func New(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: hc}
}

// WithToken returns a client of the same api, over the same connections,
// that acts as another user.
func (c *Client) WithToken(token string) *Client {
	d := *c
	d.token = token
	return &d
}

// Error is the api's refusal of a request: anything but the 2xx the
// operation answers.
type Error struct {
	Method, Path string
	StatusCode   int
	// Problem is the decoded problem+json body; its Code is empty if the
	// body was not one (a proxy's error page, say).
	Problem wire.Problem
	// RetryAfter is the answer's Retry-After in seconds (429 and some
	// 503s); 0 when it gave none, or a date, which the api never sends.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Problem.Code == "" {
		return fmt.Sprintf("%s %s: HTTP %d", e.Method, e.Path, e.StatusCode)
	}
	return fmt.Sprintf("%s %s: HTTP %d %s: %s", e.Method, e.Path, e.StatusCode, e.Problem.Code, e.Problem.Detail)
}

// Outcome is the answer to a pay or a cancel.
type Outcome struct {
	Order wire.Order
	// Recorded is false when the order's workflow accepted the request but
	// had not recorded it within the api's patience (HTTP 202): Order is
	// then the order as it was, and the change follows (an accepted
	// request is final).
	Recorded bool
}

// CreateSale creates a sale (admin).
func (c *Client) CreateSale(ctx context.Context, body wire.CreateSaleBody) (wire.Sale, error) {
	var s wire.Sale
	_, err := c.do(ctx, http.MethodPost, "/v1/sales", body, nil, &s)
	return s, err
}

// Sales lists sales, newest first; limit 0 takes the api's default.
func (c *Client) Sales(ctx context.Context, limit int) ([]wire.Sale, error) {
	var s []wire.Sale
	_, err := c.do(ctx, http.MethodGet, "/v1/sales"+limitQuery(limit), nil, nil, &s)
	return s, err
}

// Sale reads one sale with its live remaining stock.
func (c *Client) Sale(ctx context.Context, saleID string) (wire.Sale, error) {
	var s wire.Sale
	_, err := c.do(ctx, http.MethodGet, "/v1/sales/"+url.PathEscape(saleID), nil, nil, &s)
	return s, err
}

// Stats reads the operator's view of a sale (admin).
func (c *Client) Stats(ctx context.Context, saleID string) (wire.SaleStats, error) {
	var s wire.SaleStats
	_, err := c.do(ctx, http.MethodGet, "/v1/sales/"+url.PathEscape(saleID)+"/stats", nil, nil, &s)
	return s, err
}

// EndSale ends a sale now (admin).
func (c *Client) EndSale(ctx context.Context, saleID string) (wire.Sale, error) {
	return c.saleAction(ctx, saleID, "end", nil)
}

// AddUnits adds units to a sale's stock (admin).
func (c *Client) AddUnits(ctx context.Context, saleID string, units int) (wire.Sale, error) {
	return c.saleAction(ctx, saleID, "units", wire.AddUnitsBody{Units: units})
}

// CancelSale cancels a sale (admin); its unpaid orders are cancelled in
// the background, which Stats follows (Cancelling, OpenOrders).
func (c *Client) CancelSale(ctx context.Context, saleID string) (wire.Sale, error) {
	return c.saleAction(ctx, saleID, "cancel", nil)
}

// EngineProbe measures the Temporal engine's ceiling for the orders with
// body.Workflows no-op workflows started from the api (admin); it answers
// when they have all run. body.Keep leaves them in place, for
// DeleteEngineProbes once whatever is measured next is done.
func (c *Client) EngineProbe(ctx context.Context, body wire.EngineProbeBody) (wire.EngineProbe, error) {
	var p wire.EngineProbe
	_, err := c.do(ctx, http.MethodPost, "/v1/admin/engine-probe", body, nil, &p)
	return p, err
}

// DeleteEngineProbes deletes the engine probe's workflows the server
// lists, those of a probe asked to keep them included (admin).
func (c *Client) DeleteEngineProbes(ctx context.Context) (wire.ProbeCleanup, error) {
	var p wire.ProbeCleanup
	_, err := c.do(ctx, http.MethodDelete, "/v1/admin/engine-probe", nil, nil, &p)
	return p, err
}

func (c *Client) saleAction(ctx context.Context, saleID, action string, body any) (wire.Sale, error) {
	var s wire.Sale
	_, err := c.do(ctx, http.MethodPost, "/v1/sales/"+url.PathEscape(saleID)+"/"+action, body, nil, &s)
	return s, err
}

// Purchase buys one unit of a sale. A non-empty idempotencyKey makes a
// retry with the same key answer the same order as a success.
func (c *Client) Purchase(ctx context.Context, saleID, idempotencyKey string) (wire.Purchase, error) {
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var p wire.Purchase
	_, err := c.do(ctx, http.MethodPost, "/v1/sales/"+url.PathEscape(saleID)+"/orders", nil, h, &p)
	return p, err
}

// Order reads one of the user's orders.
func (c *Client) Order(ctx context.Context, orderID string) (wire.Order, error) {
	var o wire.Order
	_, err := c.do(ctx, http.MethodGet, "/v1/orders/"+url.PathEscape(orderID), nil, nil, &o)
	return o, err
}

// Orders lists the user's orders, newest first; limit 0 takes the api's
// default.
func (c *Client) Orders(ctx context.Context, limit int) ([]wire.Order, error) {
	var o []wire.Order
	_, err := c.do(ctx, http.MethodGet, "/v1/orders"+limitQuery(limit), nil, nil, &o)
	return o, err
}

// Pay pays an order awaiting payment.
func (c *Client) Pay(ctx context.Context, orderID string) (Outcome, error) {
	return c.orderAction(ctx, orderID, "pay")
}

// Cancel cancels an order awaiting payment; its unit goes back on sale.
func (c *Client) Cancel(ctx context.Context, orderID string) (Outcome, error) {
	return c.orderAction(ctx, orderID, "cancel")
}

func (c *Client) orderAction(ctx context.Context, orderID, action string) (Outcome, error) {
	var o Outcome
	status, err := c.do(ctx, http.MethodPost, "/v1/orders/"+url.PathEscape(orderID)+"/"+action, nil, nil, &o.Order)
	o.Recorded = status == http.StatusOK
	return o, err
}

func limitQuery(limit int) string {
	if limit <= 0 {
		return ""
	}
	return "?limit=" + strconv.Itoa(limit)
}

// do sends one request and decodes a 2xx answer into out; it returns the
// status. Anything else is an *Error.
func (c *Client) do(ctx context.Context, method, path string, body any, header http.Header, out any) (int, error) {
	status, _, err := c.exchange(ctx, method, path, body, header, out)
	return status, err
}

// exchange is do that also returns the answer's headers.
func (c *Client) exchange(ctx context.Context, method, path string, body any, header http.Header, out any) (int, http.Header, error) {
	resp, err := c.send(ctx, method, path, body, header)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, resp.Header, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := refusal(method, path, resp.StatusCode, b)
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		return resp.StatusCode, resp.Header, e
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, resp.Header, fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, resp.Header, nil
}

// send sends one request and returns the answer, its body unread.
func (c *Client) send(ctx context.Context, method, path string, body any, header http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return c.hc.Do(req)
}

func refusal(method, path string, status int, body []byte) *Error {
	e := &Error{Method: method, Path: path, StatusCode: status}
	// A body that is not a problem leaves Problem's Code empty.
	_ = json.Unmarshal(body, &e.Problem)
	return e
}
