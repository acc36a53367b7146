package devstack

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/lib/pq" // forgetDeadMembers' own connection

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	serverschema "go.temporal.io/server/schema"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"

	"github.com/seckill/seckill/internal/redact"
)

// Temporal's state in Postgres, as a self-hosted production server keeps
// it: the default store (shards, executions, task queues) and visibility,
// in two databases that may share a server. Their schemas are created, or
// brought up to this server's version, with the server's own schema
// tooling (the temporal-sql-tool's setup-schema and update-schema steps,
// from the schemas embedded in go.temporal.io/server), so upgrading the
// binary upgrades an existing database on its next start.

// PostgresStore names the two databases.
type PostgresStore struct {
	// URL is the default store: postgres://user:password@host:port/db?sslmode=disable.
	URL string
	// VisibilityURL is the visibility store; "" is URL's server with the
	// database name suffixed "_visibility".
	VisibilityURL string
	// Driver is the server's Postgres driver: DriverPGX (the default, "")
	// or DriverPQ.
	Driver string
}

// The Temporal server's two Postgres drivers, for PostgresStore.Driver.
// pgx prepares each statement once per connection and then sends it with
// its parameters in one round trip; lib/pq sends every statement whole,
// and with parameters in two (Parse, then Bind and Execute), so that
// Postgres parses and plans it each time (docs/performance.md, lever 8).
const (
	DriverPGX = "pgx"
	DriverPQ  = "pq"
)

// plugin is the server's SQL plugin of a driver.
func plugin(driver string) (string, error) {
	switch driver {
	case "", DriverPGX:
		return postgresql.PluginNamePGX, nil
	case DriverPQ:
		return postgresql.PluginName, nil
	}
	return "", fmt.Errorf("devstack: Postgres driver %q: want %s or %s", driver, DriverPGX, DriverPQ)
}

// Embedded schema directories of go.temporal.io/server/schema.
const (
	postgresSchema           = "postgresql/v12/temporal"
	postgresVisibilitySchema = "postgresql/v12/visibility"
)

// postgresSQL reads a postgres:// URL into the server's SQL config, with
// the plugin of driver.
func postgresSQL(raw, driver string) (*config.SQL, error) {
	pluginName, err := plugin(driver)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return nil, fmt.Errorf("devstack: %q is not a postgres://user:password@host:port/db URL", redact.URL(raw))
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return nil, fmt.Errorf("devstack: %s names no database", redact.URL(raw))
	}
	host := u.Host
	if u.Port() == "" {
		host += ":5432"
	}
	cfg := &config.SQL{PluginName: pluginName, DatabaseName: name, ConnectAddr: host, ConnectProtocol: "tcp",
		User: u.User.Username(), ConnectAttributes: map[string]string{}, MaxConns: 20, MaxIdleConns: 20}
	cfg.Password, _ = u.User.Password()
	for k, vs := range u.Query() {
		cfg.ConnectAttributes[k] = vs[len(vs)-1]
	}
	return cfg, nil
}

// visibilityURL is the visibility database's URL of a store.
func (p PostgresStore) visibilityURL() (string, error) {
	if p.VisibilityURL != "" {
		return p.VisibilityURL, nil
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return "", redact.Error(fmt.Errorf("devstack: %q: %w", redact.URL(p.URL), err), p.URL)
	}
	u.Path += "_visibility"
	return u.String(), nil
}

// preparePostgres creates the two databases if they are missing and their
// schemas at this server's version.
func preparePostgres(p PostgresStore, slogger *slog.Logger) (store, visibility *config.SQL, err error) {
	visURL, err := p.visibilityURL()
	if err != nil {
		return nil, nil, err
	}
	if store, err = postgresSQL(p.URL, p.Driver); err != nil {
		return nil, nil, err
	}
	if visibility, err = postgresSQL(visURL, p.Driver); err != nil {
		return nil, nil, err
	}
	unlock, err := lockSetup(p.URL)
	if err != nil {
		return nil, nil, redact.Error(err, p.URL)
	}
	defer unlock()
	logger := log.NewNoopLogger()
	if err := ensurePostgresSchema(store, embeddedSchema(postgresSchema), nil, logger); err != nil {
		// The drivers' errors may quote a connection string.
		return nil, nil, redact.Error(err, p.URL, visURL)
	}
	// A trim of the visibility indexes (SetVisibilityIndexes) is undone
	// before an upgrade: the versioned scripts expect the full schema.
	restore := func() error { return restoreDroppedIndexesAt(visURL, slogger) }
	if err := ensurePostgresSchema(visibility, embeddedSchema(postgresVisibilitySchema), restore, logger); err != nil {
		return nil, nil, redact.Error(err, p.URL, visURL)
	}
	if err := forgetDeadMembers(p.URL); err != nil {
		return nil, nil, redact.Error(err, p.URL)
	}
	return store, visibility, nil
}

// setupLock is the advisory lock key of lockSetup ("seckill" and 1).
const setupLock int64 = 0x7365636b696c6c01

// lockSetup serializes the schema setup of the processes of one cluster,
// which start together (README "Production by hand", docker compose): two
// that create the databases or their schemas at once fail, one on a
// duplicate database, or on tables the other has just made. It takes a
// session advisory lock in the server's maintenance database (where the
// databases are created from), held until unlock.
func lockSetup(rawURL string) (unlock func(), err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("devstack: postgres url: %w", err)
	}
	u.Path = "/postgres"
	db, err := sql.Open("postgres", u.String())
	if err != nil {
		return nil, fmt.Errorf("devstack: lock the schema setup: %w", err)
	}
	// Another process's setup takes seconds; one that hangs longer than
	// this has something else wrong, said here rather than waited on.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err == nil {
		_, err = conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", setupLock)
		if err != nil {
			_ = conn.Close()
		}
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("devstack: lock the schema setup: %w", err)
	}
	return func() {
		// Closing the session frees its lock, if the unlock did not.
		_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", setupLock)
		_ = conn.Close()
		_ = db.Close()
	}, nil
}

// restoreDroppedIndexesAt restores the visibility indexes a trim dropped,
// in the database at rawURL.
func restoreDroppedIndexesAt(rawURL string, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	db, err := sql.Open("postgres", rawURL)
	if err != nil {
		return fmt.Errorf("devstack: visibility database: %w", err)
	}
	defer db.Close()
	return restoreDroppedIndexes(ctx, db, logger)
}

// forgetDeadMembers deletes the cluster membership rows of members whose
// membership address refuses connections: processes of this cluster that
// have ended. A process restarted within ringpop's 20 s takes the rows its
// previous run left for live seeds, cannot join them, and dies a minute
// later with "failed to start ringpop" (prepareFile's forgetMembership,
// for a SQLite file that has one server only). On Postgres several
// processes share the table, so only a member that refuses a connection is
// taken for gone: a live one listens, and one that was only slow to
// answer rewrites its row at its next heartbeat.
func forgetDeadMembers(rawURL string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("postgres", rawURL)
	if err != nil {
		return fmt.Errorf("devstack: cluster membership: %w", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT membership_partition, host_id, rpc_address, rpc_port FROM cluster_membership LIMIT 1000`)
	if err != nil {
		return fmt.Errorf("devstack: cluster membership: %w", err)
	}
	type member struct {
		partition int
		host      []byte
		addr      string
	}
	var members []member
	for rows.Next() {
		var m member
		var host string
		var port int
		if err := rows.Scan(&m.partition, &m.host, &host, &port); err != nil {
			rows.Close()
			return fmt.Errorf("devstack: cluster membership: %w", err)
		}
		m.addr = net.JoinHostPort(host, strconv.Itoa(port))
		members = append(members, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("devstack: cluster membership: %w", err)
	}
	refused := map[string]bool{} // by address: one dial each
	for _, m := range members {
		gone, seen := refused[m.addr]
		if !seen {
			conn, err := net.DialTimeout("tcp", m.addr, 500*time.Millisecond)
			if err == nil {
				conn.Close()
			}
			gone = errors.Is(err, syscall.ECONNREFUSED)
			refused[m.addr] = gone
		}
		if !gone {
			continue
		}
		if _, err := db.ExecContext(ctx, `DELETE FROM cluster_membership WHERE membership_partition = $1 AND host_id = $2`, m.partition, m.host); err != nil {
			return fmt.Errorf("devstack: cluster membership: %w", err)
		}
	}
	return nil
}

// schemaSource is where a schema's versioned scripts are: a schema
// embedded in the server (name), or a directory (tests).
type schemaSource struct {
	name string
	dir  string
}

func embeddedSchema(name string) schemaSource { return schemaSource{name: name} }

// versioned is the file system and directory of the versioned scripts.
func (s schemaSource) versioned() (fs.FS, string) {
	if s.name != "" {
		return serverschema.Assets(), path.Join(s.name, "versioned")
	}
	return os.DirFS(s.dir), "."
}

// ensurePostgresSchema creates the database if it is missing, then sets up
// the schema's version table (a new database) and updates the schema to
// the newest version of src, calling beforeUpdate (if not nil) first when
// there is an update to run.
func ensurePostgresSchema(cfg *config.SQL, src schemaSource, beforeUpdate func() error, logger log.Logger) error {
	admin := *cfg
	if err := sqltool.DoCreateDatabase(&admin, "postgres", logger); err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("devstack: create database %s: %w", cfg.DatabaseName, err)
	}
	conn, err := sqltool.NewConnection(cfg, logger)
	if err != nil {
		return fmt.Errorf("devstack: connect to database %s: %w", cfg.DatabaseName, err)
	}
	defer conn.Close()
	current, err := conn.ReadSchemaVersion()
	if err != nil {
		// No version table: a new database.
		if err := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger).Run(); err != nil {
			return fmt.Errorf("devstack: set up the schema of %s: %w", cfg.DatabaseName, err)
		}
	} else if beforeUpdate != nil {
		fsys, dir := src.versioned()
		pending, err := schemaUpdatePending(fsys, dir, current)
		if err != nil {
			return err
		}
		if pending {
			if err := beforeUpdate(); err != nil {
				return err
			}
		}
	}
	update := &schema.UpdateConfig{DBName: cfg.DatabaseName, SchemaName: src.name, SchemaDir: src.dir}
	if err := schema.NewUpdateSchemaTask(conn, update, logger).Run(); err != nil {
		return fmt.Errorf("devstack: update the schema of %s: %w", cfg.DatabaseName, err)
	}
	return nil
}
