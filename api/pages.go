package api

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/api/wire"
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
	if cursor == "" {
		return 0, nil
	}
	if len(cursor) > 64 {
		return 0, badCursor(cursor[:64] + "…")
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	parts := strings.Split(string(raw), ".")
	if err == nil && len(parts) == 3 && parts[0] == cursorVersion && parts[1] == list {
		if id, err := strconv.ParseInt(parts[2], 10, 64); err == nil && id > 0 {
			return id, nil
		}
	}
	return 0, badCursor(cursor)
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
	u, ok := ctx.Value(requestURLKey{}).(*url.URL)
	if !more || !ok {
		return nil
	}
	q := u.Query()
	q.Set("cursor", encodeCursor(list, last))
	link := "<" + (&url.URL{Path: u.Path, RawQuery: q.Encode()}).String() + `>; rel="next"`
	return &link
}
