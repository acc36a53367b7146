package api

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/store"
)

// Every list pages the same way (docs/design.md §6.6): `limit` rows at a
// time, the body the array it always was, and the next page, when there
// is one, in an RFC 8288 `Link: <…>; rel="next"` header whose URL is the
// request's own with a `cursor` added. A cursor is opaque to clients: it
// names the list it belongs to and the last id of the page it ends, and a
// cursor that is not one of ours, or is another list's, is a 400 problem,
// never a silently different page.

// PageQuery are the parameters every list takes. (Exported, like every
// struct a handler's input or output embeds: huma reads the fields of
// exported embedded structs only.)
type PageQuery struct {
	Cursor string `query:"cursor" doc:"Where the page starts: the cursor of the previous page's Link header (rel=\"next\"); absent for the first page. Opaque: pass it on as it came."`
	Limit  int    `query:"limit" minimum:"1" maximum:"200" default:"50" doc:"At most this many rows in the page."`
}

// A list's name is part of its cursors.
const (
	listBuyerOrders = "o"
	listSales       = "s"
	listSaleOrders  = "so"
)

const cursorVersion = "1"

// encodeCursor is the cursor of the page after the row with id last.
func encodeCursor(list string, last int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + "." + list + "." + strconv.FormatInt(last, 10)))
}

// decodeCursor returns the last id of the page before ("" is the first
// page: 0), or a 400 problem for anything not made by encodeCursor for
// list.
func decodeCursor(list, cursor string) (int64, error) {
	keys, err := cursorKeys(list, cursor, 1)
	if err != nil || keys == nil {
		return 0, err
	}
	return keys[0], nil
}

// A sale's orders page by admission time, then id (store.SaleOrderKey):
// their cursors carry both, `1.so2.<Unix ms>.<id>`. The list's name moved
// on with its order, so a cursor of the id-ordered list before it is a
// 400 (a walk begun before an upgrade begins again), never a page of
// another order.
const listSaleOrdersByAdmission = listSaleOrders + "2"

// encodeSaleOrdersCursor is the cursor of the page after the order at
// last.
func encodeSaleOrdersCursor(last store.SaleOrderKey) string {
	return encodeCursor(listSaleOrdersByAdmission+"."+strconv.FormatInt(last.AdmittedAt.UnixMilli(), 10), last.ID)
}

// decodeSaleOrdersCursor returns the key of the last order of the page
// before (zero for the first page), or a 400 problem.
func decodeSaleOrdersCursor(cursor string) (store.SaleOrderKey, error) {
	keys, err := cursorKeys(listSaleOrdersByAdmission, cursor, 2)
	if err != nil || keys == nil {
		return store.SaleOrderKey{}, err
	}
	return store.SaleOrderKey{AdmittedAt: time.UnixMilli(keys[0]).UTC(), ID: keys[1]}, nil
}

// cursorKeys reads the n positive numbers of a cursor of list (nil for
// "", the first page), or answers a 400 problem.
func cursorKeys(list, cursor string, n int) ([]int64, error) {
	if cursor == "" {
		return nil, nil
	}
	if len(cursor) > 64 {
		return nil, badCursor(cursor[:64] + "…")
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	parts := strings.Split(string(raw), ".")
	if err != nil || len(parts) != 2+n || parts[0] != cursorVersion || parts[1] != list {
		return nil, badCursor(cursor)
	}
	keys := make([]int64, n)
	for i, p := range parts[2:] {
		if keys[i], err = strconv.ParseInt(p, 10, 64); err != nil || keys[i] <= 0 {
			return nil, badCursor(cursor)
		}
	}
	return keys, nil
}

func badCursor(cursor string) error {
	p := problem(http.StatusBadRequest, wire.CodeBadRequest, "malformed cursor: pass on the cursor of a Link header of this list unchanged")
	p.Errors = []*huma.ErrorDetail{{Location: "query.cursor", Message: "not a cursor of this list", Value: cursor}}
	return p
}

// errBadCursor documents the 400 of a list.
var errBadCursor = func() problemExample {
	e := example("malformed-cursor", "The cursor is not one of this list's Link headers", http.StatusBadRequest, wire.CodeBadRequest,
		"malformed cursor: pass on the cursor of a Link header of this list unchanged")
	e.p.Errors = []*huma.ErrorDetail{{Location: "query.cursor", Message: "not a cursor of this list", Value: "abc"}}
	return e
}()

// trimPage cuts rows read with one more than limit (which tells whether
// another page follows) to the page, and returns the id the page ends on.
func trimPage[T any](rows []T, limit int, id func(T) int64) (page []T, last int64, more bool) {
	more = len(rows) > limit
	page = rows[:min(len(rows), limit)]
	if len(page) > 0 {
		last = id(page[len(page)-1])
	}
	return page, last, more
}

// PageLink is the output header of a list: the next page, if any.
type PageLink struct {
	Link *string `header:"Link" doc:"The next page, when there is one, as an RFC 8288 link: <URL>; rel=\"next\". The URL is relative to the request's and keeps its parameters; absent on the last page."`
}

// requestURLKey carries the request's URL to the handlers that link to
// the next page.
type requestURLKey struct{}

// pagedList marks the operations that link to their next page.
const pagedList = "paged-list"

// keepURL is the middleware that puts the request's URL in the context of
// the lists (and of nothing else: a purchase pays for no copy of it).
func keepURL(ctx huma.Context, next func(huma.Context)) {
	if ctx.Operation().Metadata[pagedList] != true {
		next(ctx)
		return
	}
	u := ctx.URL()
	next(huma.WithValue(ctx, requestURLKey{}, &u))
}

// nextLink links to the page after the row with id last of list, or is
// nil when more is false.
func nextLink(ctx context.Context, list string, last int64, more bool) *string {
	if !more {
		return nil
	}
	return linkTo(ctx, encodeCursor(list, last))
}

// linkTo links to the page at cursor of the request's list.
func linkTo(ctx context.Context, cursor string) *string {
	u, ok := ctx.Value(requestURLKey{}).(*url.URL)
	if !ok {
		return nil
	}
	q := u.Query()
	q.Set("cursor", cursor)
	link := "<" + (&url.URL{Path: u.Path, RawQuery: q.Encode()}).String() + `>; rel="next"`
	return &link
}
