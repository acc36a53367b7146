package testenv

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"
	"testing"

	"github.com/lib/pq"
)

// CountingDB opens the Postgres database at url (a DatabaseURL) through
// a driver that counts every statement its connections send (BEGIN and
// COMMIT aside), for the tests that assert how many queries a request or
// a step costs. The pool is closed when the test ends.
func CountingDB(t testing.TB, url string) (*sql.DB, *atomic.Int64) {
	t.Helper()
	conn, err := pq.NewConnector(url)
	if err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int64)
	db := sql.OpenDB(countingConnector{conn, n})
	t.Cleanup(func() { db.Close() })
	return db, n
}

type countingConnector struct {
	driver.Connector
	n *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{conn, c.n}, nil
}

type countingConn struct {
	driver.Conn
	n *atomic.Int64
}

func (c countingConn) Prepare(query string) (driver.Stmt, error) {
	c.n.Add(1)
	return c.Conn.Prepare(query)
}

func (c countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.n.Add(1)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.n.Add(1)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}
