// Package store is seckill's source of truth in SQL: sales, their stock,
// orders and the stock ledger, through ent. Postgres (lib/pq) in
// production; an embedded SQLite file in the zero-install dev mode.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	_ "github.com/lib/pq" // the Postgres driver

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/ent"
	"github.com/seckill/seckill/ent/order"
	"github.com/seckill/seckill/internal/redact"
	"github.com/seckill/seckill/orderid"
)

// Store wraps the ent client.
type Store struct {
	db      *ent.Client
	sql     *sql.DB
	dialect string
	// placeOffUntil: PlaceOrder does not call its function before this
	// time (Unix ns); see placeInOne.
	placeOffUntil atomic.Int64
}

// Open connects to dsn: a postgres:// or postgresql:// URL for Postgres, or
// sqlite:PATH (sqlite::memory: for a throwaway database) for the embedded
// one. It does not create tables; call Migrate.
//
// The SQLite driver (modernc.org/sqlite, pure Go) is registered only by
// the programs that embed the database (dev mode), so everything else is
// built without its large generated code.
func Open(ctx context.Context, dsn string) (*Store, error) {
	var (
		db      *sql.DB
		err     error
		dialect string
	)
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		dialect = dialectPostgres
		db, err = sql.Open("postgres", dsn)
		if err == nil {
			db.SetMaxOpenConns(postgresPool)
			db.SetMaxIdleConns(postgresPool)
			db.SetConnMaxIdleTime(5 * time.Minute)
		}
	case strings.HasPrefix(dsn, "sqlite:"):
		dialect = dialectSQLite
		db, err = openSQLite(strings.TrimPrefix(dsn, "sqlite:"))
	default:
		return nil, fmt.Errorf("database url must start with postgres://, postgresql:// or sqlite:")
	}
	if err != nil {
		return nil, redact.Error(fmt.Errorf("open database: %w", err), dsn)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// lib/pq parses the URL here, and its parse errors quote it whole,
	// password and all.
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, redact.Error(fmt.Errorf("connect to database %s: %w", redact.URL(dsn), err), dsn)
	}
	drv := entsql.OpenDB(dialect, db)
	return &Store{db: ent.NewClient(ent.Driver(drv)), sql: db, dialect: dialect}, nil
}

// OpenPostgresDB wraps a Postgres connection pool the caller opened, for
// a caller that needs its own driver around lib/pq (the tests that count
// the queries reaching the database). It does not create tables; call
// Migrate.
func OpenPostgresDB(db *sql.DB) *Store {
	drv := entsql.OpenDB(dialectPostgres, db)
	return &Store{db: ent.NewClient(ent.Driver(drv)), sql: db, dialect: dialectPostgres}
}

// postgresPool is how many connections a process keeps to Postgres at
// most (docs/performance.md, Sizing: max_connections).
const postgresPool = 32

const (
	dialectPostgres = dialect.Postgres
	dialectSQLite   = dialect.SQLite
)

func openSQLite(path string) (*sql.DB, error) {
	if path == "" || path == ":memory:" {
		// A named shared-cache memory database lives as long as one
		// connection is open; the pool keeps one.
		path = "file:seckill?mode=memory&cache=shared"
	} else {
		path = "file:" + path
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	db, err := sql.Open("sqlite", path+sep+"_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	// SQLite has one writer; one connection turns lock errors into a queue.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	return db, nil
}

// Migrate creates or updates the tables, indexes and constraints, then
// gives the order rows without an admission time (written before the
// column existed, or since by an earlier version) their id's time.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.db.Schema.Create(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := s.migratePlaceFunction(ctx); err != nil {
		return fmt.Errorf("migrate: create %s: %w", placeFunc, err)
	}
	if err := s.fillAdmittedAt(ctx); err != nil {
		return fmt.Errorf("migrate: fill in orders' admitted_at: %w", err)
	}
	return nil
}

// FillCurrency gives the sales made before sales had a currency the
// deployment's default (`seckill migrate --default-currency`): their prices
// were in it all along. Idempotent: a sale with a currency keeps it.
func (s *Store) FillCurrency(ctx context.Context, code string) (filled int, _ error) {
	code, err := domain.ParseCurrency(code)
	if err != nil {
		return 0, fmt.Errorf("migrate: default currency: %w", err)
	}
	// SQL, not ent: the field is immutable to everything else.
	res, err := s.sql.ExecContext(ctx, `UPDATE sales SET currency = $1 WHERE currency = ''`, code)
	if err != nil {
		return 0, fmt.Errorf("migrate: fill in sales' currency: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// fillAdmittedAt sets admitted_at from the id where it is missing: the
// time the id was minted at, the nearest there is (docs/design.md §6.6).
// Postgres does it in one statement; SQLite (seckill dev) row by row, in
// Go, which writes times in the driver's own format.
func (s *Store) fillAdmittedAt(ctx context.Context) error {
	if s.dialect == dialectPostgres {
		_, err := s.sql.ExecContext(ctx, fmt.Sprintf(`UPDATE orders
SET admitted_at = timestamptz 'epoch' + ((id >> %d) + %d) * interval '1 millisecond'
WHERE admitted_at IS NULL`, orderid.TimeShift, orderid.Epoch))
		return err
	}
	ids, err := s.db.Order.Query().Where(order.AdmittedAtIsNil()).IDs(ctx)
	if err != nil || len(ids) == 0 {
		return err
	}
	return s.withTx(ctx, func(tx *ent.Tx) error {
		for _, id := range ids {
			if err := tx.Order.UpdateOneID(id).SetAdmittedAt(orderid.Time(id)).Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

// DB is the connection pool, for pool metrics.
func (s *Store) DB() *sql.DB { return s.sql }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.sql.PingContext(ctx) }

// Kind is the database the store runs on: "postgres", or "sqlite" (seckill
// dev's embedded database).
func (s *Store) Kind() string {
	if s.dialect == dialectPostgres {
		return "postgres"
	}
	return "sqlite"
}

// Client exposes the ent client for read-only reports (audit, stats).
func (s *Store) Client() *ent.Client { return s.db }

// Close closes the connection pool.
func (s *Store) Close() error { return s.db.Close() }

// withTx runs fn in a transaction, committing if it returns nil.
func (s *Store) withTx(ctx context.Context, fn func(tx *ent.Tx) error) error {
	tx, err := s.db.Tx(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
