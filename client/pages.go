package client

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/seckill/seckill/api/wire"
)

// The api's lists page with a cursor: a page's answer links to the next
// one in an RFC 8288 `Link: <…>; rel="next"` header. The All* methods
// follow the links, a page at a time, and yield each row; the iteration
// ends with the last page, or with an error (yielded with a zero row).

// AllSales yields every sale, newest first.
func (c *Client) AllSales(ctx context.Context, pageSize int) iter.Seq2[wire.Sale, error] {
	return walk[wire.Sale](ctx, c, "/v1/sales"+limitQuery(pageSize))
}

// AllOrders yields the user's orders, newest first.
func (c *Client) AllOrders(ctx context.Context, pageSize int) iter.Seq2[wire.Order, error] {
	return walk[wire.Order](ctx, c, "/v1/orders"+limitQuery(pageSize))
}

// SaleOrdersQuery picks a sale's orders (admin lists and exports). Zero
// fields do not filter.
type SaleOrdersQuery struct {
	Status       string // PAID, AWAITING_PAYMENT, ...
	Since, Until time.Time
	PageSize     int // the lists' limit; 0: the api's default
}

func (q SaleOrdersQuery) values() url.Values {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	return v
}

// SaleOrders yields a sale's orders in order of admission (admin).
func (c *Client) SaleOrders(ctx context.Context, saleID string, q SaleOrdersQuery) iter.Seq2[wire.Order, error] {
	v := q.values()
	if q.PageSize > 0 {
		v.Set("limit", fmt.Sprint(q.PageSize))
	}
	return walk[wire.Order](ctx, c, "/v1/sales/"+url.PathEscape(saleID)+"/orders?"+v.Encode())
}

// ExportSaleOrders copies a sale's orders to w as CSV or NDJSON (format
// "csv" or "ndjson"), streamed (admin). A transfer the server cut off
// returns an error: what w got then is not the whole export.
func (c *Client) ExportSaleOrders(ctx context.Context, saleID string, q SaleOrdersQuery, format string, w io.Writer) error {
	v := q.values()
	v.Set("format", format)
	path := "/v1/sales/" + url.PathEscape(saleID) + "/orders/export?" + v.Encode()
	resp, err := c.send(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return refusal(http.MethodGet, path, resp.StatusCode, b)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("GET %s: the export was cut off: %w", path, err)
	}
	return nil
}

// walk follows a list's next links from path.
func walk[T any](ctx context.Context, c *Client, path string) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		for path != "" {
			var page []T
			_, h, err := c.exchange(ctx, http.MethodGet, path, nil, nil, &page)
			if err != nil {
				yield(zero, err)
				return
			}
			for _, row := range page {
				if !yield(row, nil) {
					return
				}
			}
			if path, err = nextPath(path, h.Values("Link")); err != nil {
				yield(zero, err)
				return
			}
		}
	}
}

// nextPath is the path and query of the rel="next" link among links,
// resolved against the path it came with; "" if there is none.
func nextPath(from string, links []string) (string, error) {
	for _, header := range links {
		for _, link := range strings.Split(header, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(link), ";")
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") || !isNext(params) {
				continue
			}
			base, err := url.Parse(from)
			if err != nil {
				return "", err
			}
			ref, err := url.Parse(strings.Trim(target, "<>"))
			if err != nil {
				return "", fmt.Errorf("a Link header the client cannot read: %q: %w", header, err)
			}
			next := base.ResolveReference(ref)
			if next.Host != "" {
				return "", fmt.Errorf("a next page on another host: %q", header)
			}
			return next.RequestURI(), nil
		}
	}
	return "", nil
}

// isNext reports whether a link's parameters say rel="next" (rel may list
// several relations, RFC 8288 §3.3).
func isNext(params string) bool {
	for _, p := range strings.Split(params, ";") {
		name, value, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && strings.EqualFold(strings.TrimSpace(name), "rel") &&
			slicesContainsFold(strings.Fields(strings.Trim(strings.TrimSpace(value), `"`)), "next") {
			return true
		}
	}
	return false
}

func slicesContainsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
