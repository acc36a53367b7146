package api_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/store"
)

// listing is the api over real Postgres and Redis, no Temporal: the lists
// read rows the tests write straight to the database.
func listing(t *testing.T) *system {
	t.Helper()
	srv, db, signer := admissionOnly(t, api.Config{TemporalUIURL: "http://ui.example/", TemporalNamespace: "shop"})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &system{t: t, url: hs.URL, store: db, signer: signer}
}

// mint returns n order ids in minting order, one per millisecond of the
// last hour's first n milliseconds (as node 9 would have minted them).
func mint(t testing.TB, n int) []int64 {
	t.Helper()
	start := time.Now().Add(-time.Hour)
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = orderid.FirstAt(start.Add(time.Duration(i)*time.Millisecond)) | 9<<12
	}
	return ids
}

// nextOf is the path and query of a response's rel="next" link ("" if
// none).
func nextOf(t *testing.T, r response) string {
	t.Helper()
	link := r.header.Get("Link")
	if link == "" {
		return ""
	}
	target, rel, ok := strings.Cut(link, ">; ")
	if !ok || rel != `rel="next"` || !strings.HasPrefix(target, "<") {
		t.Fatalf("Link %q, want <URL>; rel=\"next\"", link)
	}
	return strings.TrimPrefix(target, "<")
}

// Rows are written minutes after admission and not in id order; a walk
// through a sale's orders lists every row that existed when it began once,
// a row written during the walk once if the walk had not passed its id
// (else not at all), and never a row twice.
func TestSaleOrdersWalkWhileOrdersArrive(t *testing.T) {
	s := listing(t)
	admin := s.token("ops", auth.RoleAdmin)
	sale := s.createSale(10)
	saleID, _ := strconv.ParseInt(sale.ID, 10, 64)
	rng := rand.New(rand.NewPCG(1, 2))

	ids := mint(t, 3000)
	perm := rng.Perm(len(ids))
	row := func(i int) testenv.OrderRow {
		st := []domain.Status{domain.StatusAwaitingPayment, domain.StatusPaid, domain.StatusCancelled, domain.StatusExpired}[i%4]
		return testenv.OrderRow{ID: ids[i], SaleID: saleID, UserID: fmt.Sprintf("buyer-%d", i), Status: st}
	}
	var initial []testenv.OrderRow
	for _, i := range perm[:2100] {
		initial = append(initial, row(i))
	}
	testenv.WriteOrders(t, s.store, initial)
	late := perm[2100:]

	seen := map[int64]int{}
	var last int64
	// appearsIf: a row written during the walk must appear iff its id is
	// past the walk's position when it was written.
	appearsIf := map[int64]bool{}
	path := "/v1/sales/" + sale.ID + "/orders?limit=97"
	for page := 0; path != ""; page++ {
		r := s.do("GET", path, admin, nil)
		if r.status != http.StatusOK {
			t.Fatalf("page %d: %d %s", page, r.status, r.body)
		}
		if page == 0 && r.header.Get("Seckill-Unlisted-Orders") == "" {
			t.Error("the first page has no Seckill-Unlisted-Orders header")
		}
		var orders []wire.Order
		r.decode(t, &orders)
		for _, o := range orders {
			id, _ := strconv.ParseInt(o.ID, 10, 64)
			if id <= last {
				t.Fatalf("page %d: order %d after %d: not in id order, or repeated", page, id, last)
			}
			last = id
			seen[id]++
		}
		if page == 0 {
			o := orders[0]
			id, _ := strconv.ParseInt(o.ID, 10, 64)
			if !o.AdmittedAt.Equal(orderid.Time(id)) || o.WorkflowURL != "http://ui.example/namespaces/shop/workflows/order-"+o.ID {
				t.Errorf("first row %+v: admitted_at or workflow_url wrong", o)
			}
		}
		// Orders arrive between pages, on both sides of the position.
		if len(late) > 0 {
			var batch []testenv.OrderRow
			for _, i := range late[:min(60, len(late))] {
				batch = append(batch, row(i))
				appearsIf[ids[i]] = ids[i] > last
			}
			late = late[min(60, len(late)):]
			testenv.WriteOrders(t, s.store, batch)
		}
		path = nextOf(t, r)
	}
	for _, r := range initial {
		if seen[r.ID] != 1 {
			t.Fatalf("order %d, there when the walk began, listed %d times", r.ID, seen[r.ID])
		}
	}
	for id, want := range appearsIf {
		if (seen[id] == 1) != want {
			t.Fatalf("order %d written during the walk: listed %d times, want listed=%v", id, seen[id], want)
		}
	}

	// PAID is final: a walk of the PAID orders lists every one paid
	// before it began, each once, and nothing else.
	paid := map[int64]bool{}
	for o, err := range client.New(s.url, admin, nil).SaleOrders(context.Background(), sale.ID, client.SaleOrdersQuery{Status: "PAID", PageSize: 55}) {
		if err != nil {
			t.Fatal(err)
		}
		id, _ := strconv.ParseInt(o.ID, 10, 64)
		if o.Status != domain.StatusPaid || o.PaidAt == nil || paid[id] {
			t.Fatalf("PAID walk: %+v (listed before: %v)", o, paid[id])
		}
		paid[id] = true
	}
	for _, r := range initial {
		if r.Status == domain.StatusPaid && !paid[r.ID] {
			t.Fatalf("PAID order %d missing from the PAID walk", r.ID)
		}
	}

	// A window of admission times is a window of ids.
	from, to := orderid.Time(ids[100]), orderid.Time(ids[200])
	var window []wire.Order
	r := s.do("GET", "/v1/sales/"+sale.ID+"/orders?limit=200&since="+from.Format(time.RFC3339Nano)+"&until="+to.Format(time.RFC3339Nano), admin, nil)
	r.decode(t, &window)
	for _, o := range window {
		if o.AdmittedAt.Before(from) || !o.AdmittedAt.Before(to) {
			t.Fatalf("order admitted %v outside [%v, %v)", o.AdmittedAt, from, to)
		}
	}
	if len(window) != 100 {
		t.Fatalf("the window listed %d orders, want the 100 admitted in it", len(window))
	}
}

func TestSaleOrdersAreForAdmins(t *testing.T) {
	s := listing(t)
	sale := s.createSale(10)
	// A buyer admitted but not written yet is counted, not listed.
	if r := s.buy(sale.ID, "early"); r.status != http.StatusAccepted {
		t.Fatalf("buy: %d %s", r.status, r.body)
	}
	admin := s.token("ops", auth.RoleAdmin)
	r := s.do("GET", "/v1/sales/"+sale.ID+"/orders", admin, nil)
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != "[]" || r.header.Get("Seckill-Unlisted-Orders") != "1" {
		t.Fatalf("sale with one unwritten order: %d %s, Seckill-Unlisted-Orders %q", r.status, r.body, r.header.Get("Seckill-Unlisted-Orders"))
	}
	for path, want := range map[string]int{
		"/v1/sales/" + sale.ID + "/orders":        http.StatusForbidden,
		"/v1/sales/" + sale.ID + "/orders/export": http.StatusForbidden,
	} {
		if r := s.do("GET", path, s.token("early", auth.RoleBuyer), nil); r.status != want {
			t.Errorf("buyer GET %s: %d, want %d", path, r.status, want)
		}
	}
	for _, path := range []string{"/v1/sales/424242/orders", "/v1/sales/424242/orders/export"} {
		if r := s.do("GET", path, admin, nil); r.status != http.StatusNotFound || r.problem(t).Code != wire.CodeNotFound {
			t.Errorf("GET %s of no sale: %d %s", path, r.status, r.body)
		}
	}
}

// A buyer's orders and the sales page like a sale's orders, the typed
// client following the links.
func TestBuyerOrdersAndSalesPage(t *testing.T) {
	s := listing(t)
	ctx := context.Background()
	for i := range 130 {
		if _, err := s.store.CreateSale(ctx, store.NewSale{Name: fmt.Sprint("sale ", i), Stock: 1,
			StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	var sales []string
	for sl, err := range client.New(s.url, "", nil).AllSales(ctx, 50) {
		if err != nil {
			t.Fatal(err)
		}
		sales = append(sales, sl.ID)
	}
	if len(sales) != 130 || !slices.IsSortedFunc(sales, func(a, b string) int { return compareIDs(b, a) }) || hasRepeats(sales) {
		t.Fatalf("walked %d sales (want 130, newest first, none twice)", len(sales))
	}

	// 230 ended orders of one buyer, and one admitted now that has no row.
	sale := s.createSale(5)
	saleID, _ := strconv.ParseInt(sale.ID, 10, 64)
	var rows []testenv.OrderRow
	for _, id := range mint(t, 230) {
		rows = append(rows, testenv.OrderRow{ID: id, SaleID: saleID, UserID: "ann", Status: domain.StatusCancelled})
	}
	testenv.WriteOrders(t, s.store, rows)
	r := s.buy(sale.ID, "ann")
	if r.status != http.StatusAccepted {
		t.Fatalf("buy: %d %s", r.status, r.body)
	}
	var p wire.Purchase
	r.decode(t, &p)

	var orders []string
	for o, err := range client.New(s.url, s.token("ann", auth.RoleBuyer), nil).AllOrders(ctx, 40) {
		if err != nil {
			t.Fatal(err)
		}
		orders = append(orders, o.ID)
	}
	if len(orders) != 231 || orders[0] != p.OrderID || hasRepeats(orders) ||
		!slices.IsSortedFunc(orders, func(a, b string) int { return compareIDs(b, a) }) {
		t.Fatalf("walked %d orders (want 231, newest first starting with the unwritten %s, none twice)", len(orders), p.OrderID)
	}
}

func compareIDs(a, b string) int {
	x, _ := strconv.ParseInt(a, 10, 64)
	y, _ := strconv.ParseInt(b, 10, 64)
	return cmp.Compare(x, y)
}

func hasRepeats(ids []string) bool {
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			return true
		}
		seen[id] = true
	}
	return false
}

// A cursor that is not this list's is a 400 problem, never another page.
func TestMalformedCursorsAre400(t *testing.T) {
	s := listing(t)
	sale := s.createSale(5)
	admin := s.token("ops", auth.RoleAdmin)
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	cursors := []string{"x", "!!", "%00", enc("1.o.0"), enc("1.o.-4"), enc("2.o.5"), enc("1.o.abc"), enc("1.o.5.6"), strings.Repeat("A", 300)}
	// A sale's orders page by admission time and id (1.so2.<ms>.<id>); a
	// cursor of their id-ordered paging before it is another list's.
	for _, list := range []struct{ path, own string }{
		{"/v1/orders", "o"}, {"/v1/sales", "s"}, {"/v1/sales/" + sale.ID + "/orders", "so2.1767225600000"},
	} {
		bad := append(slices.Clone(cursors), enc("1.zz.5"), enc("1.so.5"), enc("1.so2.5"), enc("1.so2.0.5"))
		if list.own != "s" {
			bad = append(bad, enc("1.s.5")) // another list's cursor
		} else {
			bad = append(bad, enc("1.o.5"))
		}
		for _, c := range bad {
			r := s.do("GET", list.path+"?cursor="+c, admin, nil)
			if r.status != http.StatusBadRequest {
				t.Errorf("GET %s?cursor=%s: %d %s, want 400", list.path, c, r.status, truncate(r.body))
				continue
			}
			if p := r.problem(t); p.Code != wire.CodeBadRequest || len(p.Errors) != 1 || p.Errors[0].Location != "query.cursor" {
				t.Errorf("GET %s?cursor=%s: problem %+v", list.path, c, p)
			}
		}
		if r := s.do("GET", list.path+"?cursor="+enc("1."+list.own+".5"), admin, nil); r.status != http.StatusOK {
			t.Errorf("GET %s with a well-formed cursor: %d %s", list.path, r.status, r.body)
		}
	}
}

// The export is the listing, streamed, with cells a spreadsheet cannot
// run.
func TestExportIsTheListing(t *testing.T) {
	s := listing(t)
	admin := s.token("ops", auth.RoleAdmin)
	sale := s.createSale(10)
	saleID, _ := strconv.ParseInt(sale.ID, 10, 64)
	evil := []string{"=HYPERLINK(\"http://x\")", "+1+2", "-3", "@SUM(A1)", "\tx", "\rx", "plain,\"quoted\""}
	var rows []testenv.OrderRow
	for i, id := range mint(t, 2300) {
		user := fmt.Sprintf("buyer-%d", i)
		if i < len(evil) {
			user = evil[i]
		}
		rows = append(rows, testenv.OrderRow{ID: id, SaleID: saleID, UserID: user,
			Status: []domain.Status{domain.StatusPaid, domain.StatusExpired}[i%2]})
	}
	testenv.WriteOrders(t, s.store, rows)

	var listed []wire.Order
	for o, err := range client.New(s.url, admin, nil).SaleOrders(context.Background(), sale.ID, client.SaleOrdersQuery{Status: "PAID", PageSize: 200}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, o)
	}

	var csvOut bytes.Buffer
	if err := client.New(s.url, admin, nil).ExportSaleOrders(context.Background(), sale.ID, client.SaleOrdersQuery{Status: "PAID"}, "csv", &csvOut); err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(&csvOut).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != len(listed)+1 || records[0][0] != "order_id" || records[0][2] != "buyer" {
		t.Fatalf("CSV: %d records (header %v), want %d orders and a header", len(records), records[0], len(listed))
	}
	for i, o := range listed {
		rec := records[i+1]
		buyer := o.UserID
		if strings.ContainsAny(buyer[:1], "=+-@\t\r") {
			buyer = "'" + buyer
		}
		if rec[0] != o.ID || rec[2] != buyer || rec[3] != "PAID" || rec[6] == "" || rec[10] != o.WorkflowURL {
			t.Fatalf("CSV row %d %q, want order %s of %q", i, rec, o.ID, buyer)
		}
	}
	for _, rec := range records[1:] {
		if c := rec[2][0]; strings.ContainsRune("=+-@\t\r", rune(c)) {
			t.Fatalf("buyer cell %q would run in a spreadsheet", rec[2])
		}
	}

	r := s.do("GET", "/v1/sales/"+sale.ID+"/orders/export", admin, nil, "Accept", "application/x-ndjson")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("NDJSON export: %d %s", r.status, r.header.Get("Content-Type"))
	}
	lines := bytes.Split(bytes.TrimSuffix(r.body, []byte("\n")), []byte("\n"))
	if len(lines) != len(rows) {
		t.Fatalf("NDJSON: %d lines, want %d", len(lines), len(rows))
	}
	for i, line := range lines {
		var o wire.Order
		if err := json.Unmarshal(line, &o); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if o.ID != strconv.FormatInt(rows[i].ID, 10) || o.UserID != rows[i].UserID {
			t.Fatalf("line %d: order %s of %q, want %d of %q", i, o.ID, o.UserID, rows[i].ID, rows[i].UserID)
		}
	}
}
