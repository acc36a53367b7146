package api

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/orders"
	"github.com/seckill/seckill/store"
)

// After the sale, operators list and export its orders to ship what was
// paid for (docs/design.md §6.6). Both read the order rows in order of
// admission (admitted_at, then id) through the (sale_id, [status,]
// admitted_at, id) indexes, so a window of admission times is a range.

// SaleOrdersQuery picks a sale's orders.
type SaleOrdersQuery struct {
	ID     string    `path:"id" pattern:"^[0-9]+$" maxLength:"19" example:"7262577180163178496" doc:"The sale's id, as in the id of a sale."`
	Status string    `query:"status" enum:"PENDING,AWAITING_PAYMENT,PAID,CANCELLED,EXPIRED,FAILED,REFUNDED,REFUNDED_RESTOCKED" doc:"Only the orders of this status."`
	Since  time.Time `query:"since" doc:"Only the orders whose admitted_at is at or after this instant (RFC 3339)."`
	Until  time.Time `query:"until" doc:"Only the orders whose admitted_at is before this instant (RFC 3339)."`
}

// filter reads the query.
func (q SaleOrdersQuery) filter() (int64, store.SaleOrderFilter, error) {
	id, err := parseID(q.ID)
	if err != nil {
		return 0, store.SaleOrderFilter{}, err
	}
	return id, store.SaleOrderFilter{Status: domain.Status(q.Status), Since: q.Since, Until: q.Until}, nil
}

type saleOrdersInput struct {
	SaleOrdersQuery
	PageQuery
}

type saleOrdersOutput struct {
	PageLink
	Unlisted *int64 `header:"Seckill-Unlisted-Orders" doc:"First page only: the orders of the sale admitted but not written to the database yet, which no page lists until their workflow writes them (they are then listed by a walk that has not passed their id). An estimate from Redis; absent when Redis does not answer."`
	Body     []wire.Order
}

type exportInput struct {
	SaleOrdersQuery
	Format string `query:"format" enum:"csv,ndjson" doc:"csv (text/csv) or ndjson (application/x-ndjson, one order per line as in the listing). Absent: an Accept header of application/x-ndjson chooses ndjson, anything else csv."`
	accept string
}

// Resolve reads the Accept header, which the document may not declare as
// a parameter (OpenAPI ignores one named Accept).
func (in *exportInput) Resolve(ctx huma.Context) []error {
	in.accept = ctx.Header("Accept")
	return nil
}

// exportPage is how many rows an export reads and writes at a time: what
// it holds in memory.
const exportPage = 1000

// bulkYield bounds how long a page of a bulk read (an export, a sale's
// order list) waits for the purchases in flight on this instance to be
// answered. Admission comes first, as for the relay (docs/design.md §5):
// during a wave an export goes on a page per bulkYield, and at full speed
// once the wave is over.
const bulkYield = 250 * time.Millisecond

// waveGap is how long after the last purchase a wave counts as over.
const waveGap = 100 * time.Millisecond

// yieldToPurchases waits while purchases are in flight here or came in
// the last waveGap, for at most bulkYield.
func (s *Server) yieldToPurchases(ctx context.Context) {
	deadline := time.Now().Add(bulkYield)
	for time.Now().Before(deadline) &&
		(len(s.inFlight) > 0 || time.Since(time.Unix(0, s.lastPurchase.Load())) < waveGap) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (s *Server) registerSaleOrders() {
	huma.Register(s.api, huma.Operation{
		OperationID: "list-sale-orders", Method: http.MethodGet, Path: "/v1/sales/{id}/orders",
		Summary: "List a sale's orders (admin)", Tags: []string{"sales"},
		Description: "The sale's orders in order of admission (`admitted_at`, then id), filtered by status and admission time (`since`, `until`: exact, to the millisecond), for fulfilment. " +
			"Paged: the next page is the `Link` header's rel=\"next\" URL. A walk through the pages lists every order that had a row when the walk began " +
			"and still matches the filter when the walk reaches it exactly once, and no order twice; an order written during the walk is listed if the walk " +
			"has not passed its place (admission time, id) yet. Orders admitted but not written yet are counted in the first page's `Seckill-Unlisted-Orders` header.",
		Security: bearer, Metadata: map[string]any{adminOnly: true, pagedList: true},
		Responses: s.problems(errNoToken, errAdminsOnly, errNoSale, errBadCursor, errInvalid, errUnavailable),
	}, s.listSaleOrders)

	huma.Register(s.api, huma.Operation{
		OperationID: "export-sale-orders", Method: http.MethodGet, Path: "/v1/sales/{id}/orders/export",
		Summary: "Export a sale's orders as CSV or NDJSON (admin)", Tags: []string{"sales"},
		Description: "The listing's orders, all of them, streamed in the listing's order in constant memory however many there are: read a page at a time, " +
			"each page when the client has taken the one before, so the file is what a walk through the listing's pages lists (every order as it was " +
			"when its page was read; every order that had a row when the export began and still matches the filter when the export reaches it, once; " +
			"an order written during the export once if the export had not passed its place, else not at all; no order twice). " +
			"A client that takes more than 30 s over a page is cut off. An instance streams a few exports at once (4 by default): " +
			"one more is refused with 429 `RATE_LIMITED` and `Retry-After`. A cell of the CSV that a spreadsheet would read as a formula (it starts with =, +, -, @, a tab or a carriage return) " +
			"is prefixed with a single quote. An export that fails once it has begun is cut off: the response ends without its last chunk, which clients " +
			"(curl among them) report as an error, so a partial file is never taken for a whole one.",
		Security: bearer, Metadata: map[string]any{adminOnly: true},
		Responses: s.exportResponses(s.problems(errNoToken, errAdminsOnly, errNoSale, errInvalid, errTooManyExports, errUnavailable)),
	}, s.exportSaleOrders)
}

// exportResponses documents the two formats of the export's 200.
func (s *Server) exportResponses(responses map[string]*huma.Response) map[string]*huma.Response {
	order := s.api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[wire.Order](), true, "Order")
	responses["200"] = &huma.Response{
		Description: "The orders: CSV with a header row (" + strings.Join(csvHeader, ", ") + "), or NDJSON, one order per line.",
		Headers: map[string]*huma.Param{"Content-Disposition": {
			Description: "attachment; filename=\"sale-<id>-orders.<csv|ndjson>\"", Schema: &huma.Schema{Type: huma.TypeString},
		}},
		Content: map[string]*huma.MediaType{
			"text/csv":             {Schema: &huma.Schema{Type: huma.TypeString}},
			"application/x-ndjson": {Schema: order},
		},
	}
	return responses
}

func (s *Server) listSaleOrders(ctx context.Context, in *saleOrdersInput) (*saleOrdersOutput, error) {
	saleID, f, err := in.filter()
	if err != nil {
		return nil, err
	}
	after, err := decodeSaleOrdersCursor(in.Cursor)
	if err != nil {
		return nil, err
	}
	s.yieldToPurchases(ctx)
	rows, err := s.deps.Store.SaleOrders(ctx, saleID, f, after, in.Limit+1)
	if err != nil {
		return nil, toHTTP(ctx, unavailable(err))
	}
	out := &saleOrdersOutput{}
	if after.ID == 0 {
		// The first page says what no page lists yet (and whether there
		// is such a sale).
		st, err := s.stats(ctx, saleID)
		switch {
		case errors.Is(err, domain.ErrUnknownSale), errors.Is(err, domain.ErrNotFound):
			return nil, toHTTP(ctx, err)
		case err == nil:
			out.Unlisted = &st.Pending
		}
	}
	more := len(rows) > in.Limit
	rows = rows[:min(len(rows), in.Limit)]
	out.Body = make([]wire.Order, len(rows))
	for i, r := range rows {
		out.Body[i] = s.orderView(orders.View(r))
	}
	if more {
		out.Link = linkTo(ctx, encodeSaleOrdersCursor(store.KeyOf(rows[len(rows)-1])))
	}
	return out, nil
}

func (s *Server) exportSaleOrders(ctx context.Context, in *exportInput) (*huma.StreamResponse, error) {
	saleID, f, err := in.filter()
	if err != nil {
		return nil, err
	}
	format := in.Format
	if format == "" {
		format = "csv"
		if strings.Contains(in.accept, "application/x-ndjson") && !strings.Contains(in.accept, "text/csv") {
			format = "ndjson"
		}
	}
	// A slot per export, taken before anything is read: beyond the cap,
	// refused at once rather than queued.
	select {
	case s.exports <- struct{}{}:
	default:
		return nil, tooManyExports()
	}
	return &huma.StreamResponse{Body: func(hc huma.Context) {
		defer func() { <-s.exports }()
		_, rw := humago.Unwrap(hc)
		w := &exportWriter{hc: hc, rc: http.NewResponseController(rw), timeout: s.cfg.ExportWriteTimeout,
			format: format, saleID: saleID, view: s.orderView}
		s.yieldToPurchases(hc.Context())
		err := s.deps.Store.ExportSaleOrders(hc.Context(), saleID, f, exportPage, func(rows []*ent.Order) error {
			if err := w.page(rows); err != nil {
				return err
			}
			s.yieldToPurchases(hc.Context())
			return nil
		})
		if err == nil {
			err = w.finish()
		}
		if err == nil {
			return
		}
		if !w.started {
			_ = w.deadline() // the problem too is the client's to take in time
			writeStreamProblem(hc, err)
			return
		}
		// Headers and rows are out: cut the response off so the client
		// sees a broken transfer rather than a file that looks whole.
		slog.InfoContext(hc.Context(), "export cut off", "sale_id", saleID, "err", err)
		panic(http.ErrAbortHandler)
	}}, nil
}

// exportRetry is the Retry-After of an export refused for the cap: an
// export of a large sale takes seconds.
const exportRetry = 5 * time.Second

// errTooManyExports documents the refusal beyond Config.MaxExports.
var errTooManyExports = func() problemExample {
	e := example("too-many-exports", "As many exports as this instance streams at once are running: retry after `Retry-After` seconds",
		http.StatusTooManyRequests, wire.CodeRateLimited, "too many exports running; retry after "+strconv.Itoa(retrySeconds(exportRetry))+"s")
	e.header = "Retry-After"
	return e
}()

func tooManyExports() error {
	return huma.ErrorWithHeaders(
		problem(http.StatusTooManyRequests, wire.CodeRateLimited, errTooManyExports.p.Detail),
		http.Header{"Retry-After": {strconv.Itoa(retrySeconds(exportRetry))}})
}

// csvHeader names the export's CSV columns. New ones go at the end, so
// that a reader that takes columns by position keeps working.
var csvHeader = []string{"order_id", "sale_id", "buyer", "status", "amount_cents", "admitted_at", "paid_at", "updated_at", "reason", "workflow_id", "workflow_url", "currency",
	"payment_provider", "payment_id", "refunded_at", "refund_reason"}

// exportWriter writes pages of orders as CSV or NDJSON, flushing each
// within a write deadline.
type exportWriter struct {
	hc huma.Context
	rc *http.ResponseController
	// timeout is how long the client has to take a page.
	timeout time.Duration
	format  string
	saleID  int64
	view    func(orders.Order) wire.Order
	started bool
	csv     *csv.Writer
	json    *json.Encoder
}

func (w *exportWriter) start() error {
	w.started = true
	ct := "text/csv; charset=utf-8"
	if w.format == "ndjson" {
		ct = "application/x-ndjson"
	}
	w.hc.SetHeader("Content-Type", ct)
	w.hc.SetHeader("Content-Disposition", fmt.Sprintf(`attachment; filename="sale-%d-orders.%s"`, w.saleID, w.format))
	w.hc.SetHeader("Cache-Control", "no-store")
	w.hc.SetStatus(http.StatusOK)
	body := w.hc.BodyWriter()
	if w.format == "ndjson" {
		w.json = json.NewEncoder(body)
		return nil
	}
	w.csv = csv.NewWriter(body)
	return w.csv.Write(csvHeader)
}

func (w *exportWriter) page(rows []*ent.Order) error {
	if err := w.deadline(); err != nil {
		return err
	}
	if err := w.begin(); err != nil {
		return err
	}
	for _, r := range rows {
		o := w.view(orders.View(r))
		var err error
		if w.json != nil {
			err = w.json.Encode(o)
		} else {
			err = w.csv.Write(csvRow(o))
		}
		if err != nil {
			return err
		}
	}
	return w.flush()
}

// finish writes what an export of no order still has: the CSV header.
func (w *exportWriter) finish() error {
	if err := w.deadline(); err != nil {
		return err
	}
	if err := w.begin(); err != nil {
		return err
	}
	return w.flush()
}

// deadline gives the client w.timeout from now to take what is written
// next. A client that stops reading fails the write then, and the export
// ends, instead of holding its slot, its goroutine and its connection for
// as long as it likes. (The server resets the deadline once the response
// is done, for the connection's next request.)
func (w *exportWriter) deadline() error {
	if err := w.rc.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return fmt.Errorf("set the export's write deadline: %w", err)
	}
	return nil
}

// begin starts the response, once.
func (w *exportWriter) begin() error {
	if w.started {
		return nil
	}
	return w.start()
}

func (w *exportWriter) flush() error {
	if w.csv != nil {
		w.csv.Flush()
		if err := w.csv.Error(); err != nil {
			return err
		}
	}
	if f, ok := w.hc.BodyWriter().(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

func csvRow(o wire.Order) []string {
	paid := ""
	if o.PaidAt != nil {
		paid = o.PaidAt.Format(time.RFC3339Nano)
	}
	refunded := ""
	if o.RefundedAt != nil {
		refunded = o.RefundedAt.Format(time.RFC3339Nano)
	}
	return []string{
		o.ID, o.SaleID, cell(o.UserID), string(o.Status), strconv.FormatInt(o.AmountCents, 10),
		o.AdmittedAt.Format(time.RFC3339Nano), paid, o.UpdatedAt.Format(time.RFC3339Nano),
		cell(o.Reason), o.WorkflowID, o.WorkflowURL, o.Currency,
		o.PaymentProvider, cell(o.PaymentID), refunded, cell(o.RefundReason),
	}
}

// cell makes text safe for a spreadsheet: a cell that starts with a
// character that makes it a formula (=, +, -, @, tab, carriage return)
// gets a leading single quote, which spreadsheets show as text (the OWASP
// advice on CSV injection). Buyer ids are token subjects: anyone's text.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// writeStreamProblem answers a problem from a stream that has written
// nothing yet.
func writeStreamProblem(hc huma.Context, err error) {
	var se huma.StatusError
	if !errors.As(toHTTP(hc.Context(), notFoundOr(err)), &se) {
		se = problem(http.StatusInternalServerError, wire.CodeInternal, "internal error")
	}
	hc.SetHeader("Content-Type", "application/problem+json")
	hc.SetStatus(se.GetStatus())
	_ = json.NewEncoder(hc.BodyWriter()).Encode(se)
}
