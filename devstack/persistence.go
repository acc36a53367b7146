package devstack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	persistencesql "go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/resolver"
	sqliteschema "go.temporal.io/server/schema/sqlite"

	"github.com/seckill/seckill/internal/scratch"
)

// memDBSeq makes the names of in-memory databases unique in the process: the
// SQLite plugin shares one connection per DSN, so two servers with the same
// in-memory name would share (and corrupt) one database.
var memDBSeq atomic.Int64

// scratchPrefix names the tmpfs directories (scratch.Root) that hold the
// databases of servers that keep nothing (DBFile == ""), where the machine
// has tmpfs: a WAL-mode file there costs the engine less CPU and memory
// than SQLite's own memory mode (docs/performance.md, "Levers").
const scratchPrefix = "seckill-temporal-"

// database is where a server's SQLite store lives.
type database struct {
	cfg *config.SQL
	// visibility is Postgres's visibility store; nil for SQLite, whose
	// one database holds visibility too.
	visibility *config.SQL
	// visibilityURL is the Postgres visibility database's URL; "" for
	// SQLite.
	visibilityURL string
	// scratch is the tmpfs directory of a database that must not outlive
	// the server, removed by Stop; "" for a DBFile or SQLite's memory mode.
	scratch string
}

// prepareDatabase returns the SQLite store, after creating the schema (for
// a new file) and the namespace (unless it exists).
func prepareDatabase(ctx context.Context, opts TemporalOptions) (database, error) {
	if opts.Postgres != nil {
		// The namespace is registered through the frontend once it runs
		// (configure): the SQLite tooling that writes it beforehand has
		// no Postgres twin.
		logger := opts.Logger
		if logger == nil {
			logger = slog.Default()
		}
		store, visibility, err := preparePostgres(*opts.Postgres, logger)
		if err != nil {
			return database{}, err
		}
		visURL, err := opts.Postgres.visibilityURL()
		return database{cfg: store, visibility: visibility, visibilityURL: visURL}, err
	}
	db := database{cfg: &config.SQL{PluginName: sqliteplugin.PluginName}}
	path := opts.DBFile
	if path == "" {
		db.scratch = scratch.Dir(scratch.Root, scratchPrefix)
		if db.scratch != "" {
			path = filepath.Join(db.scratch, "temporal.db")
		}
	}
	if path == "" {
		// No tmpfs here: SQLite's memory mode. The plugin creates the
		// schema itself for in-memory databases.
		db.cfg.DatabaseName = fmt.Sprintf("devstack-%d-%d", os.Getpid(), memDBSeq.Add(1))
		db.cfg.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
	} else if err := prepareFile(ctx, db.cfg, path); err != nil {
		db.remove()
		return database{}, err
	}
	if err := createNamespace(db.cfg, opts); err != nil {
		db.remove()
		return database{}, err
	}
	return db, nil
}

func prepareFile(ctx context.Context, sqlCfg *config.SQL, file string) error {
	path, err := filepath.Abs(file)
	if err != nil {
		return fmt.Errorf("devstack: database file %q: %w", file, err)
	}
	sqlCfg.DatabaseName = path
	sqlCfg.ConnectAttributes = fileAttributes()
	if err := ensureSchema(sqlCfg, path); err != nil {
		return err
	}
	return forgetMembership(ctx, sqlCfg)
}

// remove deletes a scratch database. The plugin keeps its connection open
// for the life of the process (see doc.go), so the memory returns at exit,
// as it would in SQLite's memory mode.
func (db database) remove() {
	if db.scratch != "" {
		_ = os.RemoveAll(db.scratch)
	}
}

// fileAttributes open a database file in WAL mode with synchronous=NORMAL:
// a commit appends to the log without waiting for the disk, and a crash of
// the process loses nothing committed (a power cut may lose the last
// commits, acceptable for a development server). The rollback journal,
// SQLite's default, rewrote and synced the journal on every one of the
// engine's many small transactions.
func fileAttributes() map[string]string {
	return map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "normal"}
}

func ensureSchema(sqlCfg *config.SQL, path string) error {
	info, err := os.Stat(path)
	switch {
	case err == nil && info.Size() > 0:
		return nil // existing database, schema already there
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("devstack: database file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("devstack: database directory: %w", err)
	}
	if err := sqliteschema.SetupSchema(sqlCfg); err != nil {
		// A half-created schema would make every later start fail obscurely.
		return fmt.Errorf("devstack: create schema in %s (delete the file before retrying): %w", path, err)
	}
	return nil
}

// forgetMembership deletes the cluster membership rows of earlier runs on this
// file. Their services are gone, but on a restart within 20 s (or after a
// crash) ringpop still takes them for live seeds, fails to join them, and the
// new server's services never find each other: "Not enough hosts to serve the
// request", then a fatal "failed to start ringpop" about a minute later. The
// file belongs to this one server, so no live member can be deleted here.
func forgetMembership(ctx context.Context, sqlCfg *config.SQL) error {
	db, err := persistencesql.NewSQLDB(sqlplugin.DbKindMain, sqlCfg, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("devstack: open %s: %w", sqlCfg.DatabaseName, err)
	}
	defer func() { _ = db.Close() }()
	// Rows expire 48 h after their last heartbeat; pruning everything that
	// expires before a date far ahead removes them all.
	farFuture := time.Now().AddDate(10, 0, 0)
	if _, err := db.PruneClusterMembership(ctx, &sqlplugin.PruneClusterMembershipFilter{PruneRecordsBefore: farFuture}); err != nil {
		return fmt.Errorf("devstack: clear stale cluster membership in %s: %w", sqlCfg.DatabaseName, err)
	}
	return nil
}
