package api_test

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/store"
)

// The security review's slow export: a client that opens an export and
// never reads. Its export once held a transaction for as long as the
// client liked (SQLite's one connection; on Postgres a connection and a
// snapshot that blocks vacuum), and nothing bounded how many ran.

// exportServer is the api over backend ("postgres" or "sqlite") and Redis,
// served with small socket send buffers, so that a client that stops
// reading stalls its export within the first page rather than after the
// megabytes the kernel would buffer.
func exportServer(t *testing.T, backend string, cfg api.Config) (*system, *api.Server) {
	t.Helper()
	db := testenv.Store(t)
	if backend == "sqlite" {
		ctx := context.Background()
		var err error
		if db, err = store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "seckill.db")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	srv, db, signer := admissionOnlyOn(t, cfg, db)
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.Listener = smallSendBuffers{hs.Listener}
	hs.Start()
	t.Cleanup(hs.Close)
	return &system{t: t, url: hs.URL, store: db, signer: signer}, srv
}

type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// saleWithOrders creates a sale with n orders (buyer-0 … buyer-n-1), three
// pages of export and more: far more than the sockets buffer.
func saleWithOrders(t *testing.T, s *system, n int) wire.Sale {
	t.Helper()
	sale := s.createSale(10)
	saleID, _ := strconv.ParseInt(sale.ID, 10, 64)
	rows := make([]testenv.OrderRow, n)
	for i, id := range mint(t, n) {
		rows[i] = testenv.OrderRow{ID: id, SaleID: saleID, UserID: fmt.Sprintf("buyer-%d", i), Status: domain.StatusPaid}
	}
	testenv.WriteOrders(t, s.store, rows)
	return sale
}

// stallExport sends GET path and reads the answer's headers, and no more:
// the client then never reads, and holds the connection until the test
// ends or closes it.
func stallExport(t *testing.T, s *system, path, token string) (*http.Response, net.Conn) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: seckill\r\nAuthorization: Bearer %s\r\n\r\n", path, token); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4<<10), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp, conn
}

// An export whose client never reads holds no database: beside it, the
// reads answer at once, and no session sits in a transaction or holds a
// snapshot.
func TestStalledExportHoldsNoDatabase(t *testing.T) {
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			s, srv := exportServer(t, backend, api.Config{})
			admin := s.token("ops", auth.RoleAdmin)
			sale := saleWithOrders(t, s, 3000)
			resp, conn := stallExport(t, s, "/v1/sales/"+sale.ID+"/orders/export?format=csv", admin)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("export: %d", resp.StatusCode)
			}

			quick := &http.Client{Timeout: 5 * time.Second}
			for path, token := range map[string]string{
				"/v1/sales/" + sale.ID: "",
				"/v1/orders":           s.token("buyer-7", auth.RoleBuyer),
				"/v1/sales/" + sale.ID + "/orders?limit=5": admin,
			} {
				req, _ := http.NewRequest("GET", s.url+path, nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				r, err := quick.Do(req)
				if err != nil {
					t.Fatalf("GET %s beside the stalled export: %v", path, err)
				}
				_, _ = io.Copy(io.Discard, r.Body)
				r.Body.Close()
				if r.StatusCode != http.StatusOK {
					t.Fatalf("GET %s beside the stalled export: %d", path, r.StatusCode)
				}
			}
			if held := testenv.HeldSnapshots(t, s.store); held != "" {
				t.Fatalf("while its client stalls, the export holds %s", held)
			}
			if n := srv.ExportsRunning(); n != 1 {
				t.Fatalf("%d exports running, want the stalled one", n)
			}

			// Gone, the client frees the export's slot.
			conn.Close()
			testenv.Eventually(t, 10*time.Second, func() error {
				if n := srv.ExportsRunning(); n != 0 {
					return fmt.Errorf("%d exports running after their client closed", n)
				}
				return nil
			})
		})
	}
}

// A client that takes longer than the write deadline over a page is cut
// off, and its export ends; what it got reads as a broken transfer, never
// as a whole file.
func TestStalledExportIsCutOffAtTheWriteDeadline(t *testing.T) {
	s, srv := exportServer(t, "postgres", api.Config{ExportWriteTimeout: 200 * time.Millisecond})
	sale := saleWithOrders(t, s, 3000)
	resp, conn := stallExport(t, s, "/v1/sales/"+sale.ID+"/orders/export?format=csv", s.token("ops", auth.RoleAdmin))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("export: %d", resp.StatusCode)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := srv.ExportsRunning(); n != 0 {
			return fmt.Errorf("%d exports running, their client stalled past the write deadline", n)
		}
		return nil
	})
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the cut-off export read %d bytes and then %v, want a broken transfer", n, err)
	}
}

// Beyond Config.MaxExports exports at once, an export is refused with a
// 429 problem and Retry-After; once one ends, the next is let in.
func TestExportsBeyondTheCapAreRefused(t *testing.T) {
	s, srv := exportServer(t, "postgres", api.Config{MaxExports: 2})
	admin := s.token("ops", auth.RoleAdmin)
	sale := saleWithOrders(t, s, 3000)
	path := "/v1/sales/" + sale.ID + "/orders/export?format=csv"
	var first net.Conn
	for i := range 2 {
		resp, conn := stallExport(t, s, path, admin)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("export %d of 2: %d", i+1, resp.StatusCode)
		}
		if i == 0 {
			first = conn
		}
	}

	r := s.do("GET", path, admin, nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a third export: %d %s %s, want a 429 problem", r.status, r.header.Get("Content-Type"), r.body)
	}
	var p wire.Problem
	r.decode(t, &p)
	if retry, err := strconv.Atoi(r.header.Get("Retry-After")); p.Code != wire.CodeRateLimited || err != nil || retry < 1 {
		t.Fatalf("a third export: code %s, Retry-After %q, want RATE_LIMITED and seconds", p.Code, r.header.Get("Retry-After"))
	}

	first.Close()
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := srv.ExportsRunning(); n != 1 {
			return fmt.Errorf("%d exports running, want 1 once a client closed", n)
		}
		return nil
	})
	r = s.do("GET", path, admin, nil)
	if r.status != http.StatusOK {
		t.Fatalf("an export once a slot is free: %d %s", r.status, r.body)
	}
	records, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil || len(records) != 3001 {
		t.Fatalf("the export once a slot is free: %d records, %v; want a header and 3000 orders", len(records), err)
	}
}
