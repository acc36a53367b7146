package api_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/orderid"
	"github.com/seckill/seckill/redisack"
	"github.com/seckill/seckill/relay"
)

// An order's admitted_at is the admitting api's clock when it admitted
// the buyer, to the millisecond, whatever time its id encodes: an api
// restarted on the node it held mints above that node's floor, the last
// term its previous run confirmed (up to 27 s ahead with serve's 30 s
// lease), as `seckill serve` restarted would. The fulfilment filters
// (since, until) find every order admitted in a window, the listing is in
// order of admission, and the websocket's PENDING events carry the
// admission time, never one after the AWAITING_PAYMENT that follows.
func TestAdmittedAtIsTheAdmittingAPIsClock(t *testing.T) {
	// No relay until every order is admitted: the orders wait in line, so
	// their buyers' sockets are told PENDING (with a place) first.
	cfg := api.Config{NoRelay: true, LineRefresh: 50 * time.Millisecond}
	s := start(t, options{cfg: cfg})
	ctx := context.Background()
	sale := s.createSale(3)

	var stop func()
	node := -1
	// restart stops the leased api (if any) and starts another on the
	// node the first one took, as serve does (cmd/seckill/serve.go).
	restart := func() {
		t.Helper()
		if stop != nil {
			stop()
		}
		if node >= 0 {
			// Every other node is held (the lease keys of orderid/lease.go):
			// the new lease takes this one back.
			pipe := s.redis.Pipeline()
			for n := range orderid.MaxNodes {
				if n != node {
					pipe.Set(ctx, fmt.Sprintf("seckill:orderid:node:%d", n), "busy", time.Minute)
				}
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		lease, err := orderid.LeaseNode(ctx, s.redis, 30*time.Second, redisack.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if node >= 0 && lease.Node() != node {
			t.Fatalf("the restarted api leased node %d, want %d", lease.Node(), node)
		}
		node = lease.Node()
		srv := api.New(cfg, api.Deps{Store: s.store, Stock: s.stock, Temporal: s.tc, Signer: s.signer, IDs: orderid.Leased(lease)})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = srv.Run(rctx); close(done) }()
		hs := httptest.NewServer(srv.Handler())
		stop = func() { hs.Close(); cancel(); <-done; _ = lease.Close(ctx) }
		s.srv, s.url = srv, hs.URL
	}
	t.Cleanup(func() { stop() })

	type placed struct {
		user, id      string
		before, after time.Time // the purchase request's wall-clock window
		pending       domain.Event
	}
	var all []*placed
	for _, user := range []string{"first", "second", "third"} {
		restart()
		sk := s.connect(user)
		p := &placed{user: user, before: time.Now()}
		r := s.buy(sale.ID, user)
		p.after = time.Now()
		if r.status != http.StatusAccepted {
			t.Fatalf("%s buys: %d %s", user, r.status, r.body)
		}
		var pr wire.Purchase
		r.decode(t, &pr)
		p.id = pr.OrderID
		// Told by the api that admitted it (its place in line).
		p.pending = awaitEvent(t, sk, p.id, "PENDING with a place", func(e domain.Event) bool {
			return e.Status == domain.StatusPending && e.QueuePosition > 0
		})
		all = append(all, p)
	}
	for _, p := range all[1:] {
		if id := mustID(t, p.id); !orderid.Time(id).After(p.after.Add(time.Second)) {
			t.Fatalf("order %s of the restarted api was minted at %s, not ahead of its purchase (%s): the case is not made",
				p.id, orderid.Time(id).Format(time.RFC3339Nano), p.after.Format(time.RFC3339Nano))
		}
	}

	// Every buyer on the last api, then the orders start.
	sockets := map[string]*socket{}
	for _, p := range all {
		sockets[p.user] = s.connect(p.user)
	}
	r := relay.New(s.stock, relay.NewTemporalStarter(s.tc), relay.Options{})
	rctx, cancel := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() { _ = r.Run(rctx); close(relayDone) }()
	t.Cleanup(func() { cancel(); <-relayDone })

	admin := s.token("ops", auth.RoleAdmin)
	for _, p := range all {
		sk := sockets[p.user]
		var pendings []domain.Event
		awaiting := awaitEvent(t, sk, p.id, "AWAITING_PAYMENT", func(e domain.Event) bool {
			if e.Status == domain.StatusPending {
				pendings = append(pendings, e)
			}
			return e.Status == domain.StatusAwaitingPayment
		})
		o, resp := s.getOrder(p.id, p.user)
		if resp.status != http.StatusOK {
			t.Fatalf("get order %s: %d %s", p.id, resp.status, resp.body)
		}
		from := p.before.Truncate(time.Millisecond)
		if o.AdmittedAt.Before(from) || o.AdmittedAt.After(p.after) {
			t.Errorf("order %s of %s: admitted_at %s, outside its purchase's window [%s, %s]", p.id, p.user,
				o.AdmittedAt.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano), p.after.Format(time.RFC3339Nano))
		}
		if o.CreatedAt.Before(o.AdmittedAt) {
			t.Errorf("order %s: created_at %s before admitted_at %s", p.id, o.CreatedAt.Format(time.RFC3339Nano), o.AdmittedAt.Format(time.RFC3339Nano))
		}
		if !p.pending.At.Equal(o.AdmittedAt) {
			t.Errorf("order %s: the admitting api's PENDING event is at %s, want admitted_at %s", p.id,
				p.pending.At.Format(time.RFC3339Nano), o.AdmittedAt.Format(time.RFC3339Nano))
		}
		for _, e := range append(pendings, p.pending) {
			if e.At.After(awaiting.At) {
				t.Errorf("order %s: PENDING at %s, after its AWAITING_PAYMENT at %s", p.id,
					e.At.Format(time.RFC3339Nano), awaiting.At.Format(time.RFC3339Nano))
			}
		}
	}

	// The fulfilment filters: the window of the three purchases lists all
	// three, in order of admission; the millisecond of each order's
	// admission lists it alone; the export agrees.
	list := func(since, until time.Time) []string {
		t.Helper()
		q := url.Values{"since": {since.Format(time.RFC3339Nano)}, "until": {until.Format(time.RFC3339Nano)}}
		r := s.do("GET", "/v1/sales/"+sale.ID+"/orders?"+q.Encode(), admin, nil)
		if r.status != http.StatusOK {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		var os []wire.Order
		r.decode(t, &os)
		ids := make([]string, len(os))
		for i, o := range os {
			ids[i] = o.ID
		}
		return ids
	}
	want := []string{all[0].id, all[1].id, all[2].id}
	now := time.Now()
	if got := list(all[0].before.Add(-time.Minute), now); !slices.Equal(got, want) {
		t.Errorf("since=<a minute before the first purchase>&until=<now>: %v, want %v", got, want)
	}
	for _, p := range all {
		o, _ := s.getOrder(p.id, p.user)
		if got := list(o.AdmittedAt, o.AdmittedAt.Add(time.Millisecond)); !slices.Equal(got, []string{p.id}) {
			t.Errorf("the millisecond of %s's admission (%s): %v, want [%s]", p.user, o.AdmittedAt.Format(time.RFC3339Nano), got, p.id)
		}
	}
	// From the millisecond of the first request: admitted_at is kept to
	// the millisecond, so the first order's can read a little before the
	// request's own nanosecond clock (a flake in CI twice).
	q := url.Values{"since": {all[0].before.Truncate(time.Millisecond).Format(time.RFC3339Nano)}, "until": {now.Format(time.RFC3339Nano)}, "format": {"csv"}}
	exp := s.do("GET", "/v1/sales/"+sale.ID+"/orders/export?"+q.Encode(), admin, nil)
	rows, err := csv.NewReader(strings.NewReader(string(exp.body))).ReadAll()
	if exp.status != http.StatusOK || err != nil || len(rows) != 4 {
		t.Fatalf("export of the window: %d, %d rows (%v), want the header and 3 orders:\n%s", exp.status, len(rows), err, exp.body)
	}
	for i, row := range rows[1:] {
		o, _ := s.getOrder(all[i].id, all[i].user)
		if row[0] != all[i].id || row[5] != o.AdmittedAt.Format(time.RFC3339Nano) {
			t.Errorf("export row %d: %v, want order %s admitted at %s", i+1, row, all[i].id, o.AdmittedAt.Format(time.RFC3339Nano))
		}
	}
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	var id int64
	if _, err := fmt.Sscan(s, &id); err != nil {
		t.Fatal(err)
	}
	return id
}
