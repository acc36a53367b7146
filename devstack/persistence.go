package devstack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
)

// memDBSeq makes the names of in-memory databases unique in the process: the
// SQLite plugin shares one connection per DSN, so two servers with the same
// in-memory name would share (and corrupt) one database.
var memDBSeq atomic.Int64

// prepareDatabase returns the SQLite store config, after creating the schema
// (for a new file) and the namespace (unless it exists).
func prepareDatabase(ctx context.Context, opts TemporalOptions) (*config.SQL, error) {
	sqlCfg := &config.SQL{PluginName: sqliteplugin.PluginName}
	if opts.DBFile == "" {
		// The plugin creates the schema itself for in-memory databases.
		sqlCfg.DatabaseName = fmt.Sprintf("devstack-%d-%d", os.Getpid(), memDBSeq.Add(1))
		sqlCfg.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
	} else {
		path, err := filepath.Abs(opts.DBFile)
		if err != nil {
			return nil, fmt.Errorf("devstack: database file %q: %w", opts.DBFile, err)
		}
		sqlCfg.DatabaseName = path
		sqlCfg.ConnectAttributes = map[string]string{"mode": "rwc"}
		if err := ensureSchema(sqlCfg, path); err != nil {
			return nil, err
		}
		if err := forgetMembership(ctx, sqlCfg); err != nil {
			return nil, err
		}
	}

	if err := createNamespace(sqlCfg, opts); err != nil {
		return nil, err
	}
	return sqlCfg, nil
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
