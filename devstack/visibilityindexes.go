package devstack

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/lib/pq"
	"go.temporal.io/api/workflowservice/v1"
	serverschema "go.temporal.io/server/schema"

	"github.com/seckill/seckill/internal/redact"
)

// Temporal's visibility table on Postgres, executions_visibility, comes
// with 73 indexes besides its primary key: one per filterable column, the
// pre-allocated custom search attribute columns (Bool01…, Keyword01…,
// Text01…) among them. Every visibility write (a workflow's start record,
// each search-attribute upsert, the close) rewrites the whole row, and
// since the row's indexed columns change, Postgres adds an entry to every
// index. Trimmed, the table keeps only the indexes that seckill's own
// queries and the Web UI's default list and filters use:
//
//   - default_idx (namespace_id, COALESCE(close_time), start_time, run_id):
//     every list's order, the Web UI's unfiltered list, and counts;
//   - by_workflow_type: WorkflowType = (the reconciler's stranded repair,
//     the engine probe, the Web UI's filter);
//   - by_workflow_id: WorkflowId = (the Web UI's filter and its links to
//     one workflow);
//   - by_status: ExecutionStatus = (the audit, the probe's count, the Web
//     UI's filter);
//   - the columns of the search attributes given (SaleId, OrderStatus):
//     the audit's count and the stranded repair filter on them.
//
// RunId = is the primary key's. Everything else is still queryable, by a
// scan of the namespace's rows instead of an index.
//
// The dropped indexes' definitions are kept in a table of seckill's own in
// the visibility database (droppedIndexesTable), so that before a schema
// upgrade (a newer Temporal's versioned scripts, which may DROP an index
// without IF EXISTS, as v1.6's did) they are put back exactly as they were,
// and the upgrade finds the schema it expects (restoreDroppedIndexes).
// Switching back to full re-creates every index of the server's schema
// from its own definitions (schema.sql, embedded in the server).

// Visibility index modes (TemporalCmd's --visibility-indexes).
const (
	VisibilityIndexesFull    = "full"
	VisibilityIndexesTrimmed = "trimmed"
)

const (
	visibilityTable     = "executions_visibility"
	droppedIndexesTable = "seckill_dropped_indexes"
	// indexLockKey is the advisory lock that keeps two processes of one
	// cluster from changing the indexes at once.
	indexLockKey = 0x5ec4111d
)

// keptVisibilityIndexes are the indexes on system columns kept trimmed.
var keptVisibilityIndexes = []string{"default_idx", "by_workflow_type", "by_workflow_id", "by_status"}

// schemaIndex is one CREATE INDEX of the server's visibility schema.
type schemaIndex struct {
	name string
	// column is the first column after namespace_id, lower case ("" when
	// it is an expression, as default_idx's is).
	column string
	create string
}

var (
	createIndexRe = regexp.MustCompile(`(?is)^\s*CREATE\s+INDEX\s+(\w+)\s+ON\s+` + visibilityTable + `\s+(?:USING\s+\w+\s*)?\((.*)\)\s*$`)
	// createPrefixRe is the head of a CREATE INDEX, from the schema or
	// from pg_get_indexdef, to which CONCURRENTLY IF NOT EXISTS is added.
	// indexDefRe is pg_get_indexdef's form of an index of the table.
	indexDefRe     = regexp.MustCompile(`^CREATE (?:UNIQUE )?INDEX (\w+) ON (?:public\.)?` + visibilityTable + ` USING \w+ \([^;]*$`)
	createPrefixRe = regexp.MustCompile(`(?i)^\s*CREATE\s+(UNIQUE\s+)?INDEX\s+`)
)

// visibilitySchemaIndexes reads the indexes of the visibility table from
// the server's schema.sql (the schema a new database gets).
func visibilitySchemaIndexes() ([]schemaIndex, error) {
	return readSchemaIndexes(serverschema.Assets(), path.Join(postgresVisibilitySchema, "schema.sql"))
}

func readSchemaIndexes(fsys fs.FS, file string) ([]schemaIndex, error) {
	body, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, fmt.Errorf("devstack: visibility schema: %w", err)
	}
	var out []schemaIndex
	for stmt := range strings.SplitSeq(stripSQLComments(string(body)), ";") {
		m := createIndexRe.FindStringSubmatch(stmt)
		if m == nil {
			continue
		}
		cols := splitTopLevel(m[2])
		idx := schemaIndex{name: strings.ToLower(m[1]), create: strings.TrimSpace(stmt)}
		if len(cols) > 1 {
			if f := strings.Fields(cols[1]); len(f) > 0 && !strings.HasPrefix(f[0], "(") {
				idx.column = strings.ToLower(f[0])
			}
		}
		out = append(out, idx)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("devstack: no index of %s in %s", visibilityTable, file)
	}
	return out, nil
}

func stripSQLComments(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.Index(l, "--"); j >= 0 {
			lines[i] = l[:j]
		}
	}
	return strings.Join(lines, "\n")
}

// splitTopLevel splits an index's column list at the commas outside
// parentheses.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// concurrently makes a CREATE INDEX build without blocking the table's
// writes and do nothing when the index exists.
func concurrently(create string) string {
	return createPrefixRe.ReplaceAllString(create, "CREATE ${1}INDEX CONCURRENTLY IF NOT EXISTS ")
}

// SetVisibilityIndexes makes the Postgres visibility table's indexes those
// of mode: full, every index of the server's schema (re-creating any a
// trim dropped), or trimmed, only those seckill's queries and the Web UI's
// defaults use, with the ones on searchAttributes' columns. The mapping of
// a custom search attribute to its column (SaleId → Keyword01) is the
// namespace's, read from the server. It does nothing on SQLite. Call it
// once the namespace has searchAttributes.
func (t *Temporal) SetVisibilityIndexes(ctx context.Context, mode string, searchAttributes []string, logger *slog.Logger) error {
	if t.db.visibilityURL == "" {
		return nil
	}
	var columns []string
	if mode == VisibilityIndexesTrimmed {
		var err error
		if columns, err = t.searchAttributeColumns(ctx, searchAttributes, logger); err != nil {
			return err
		}
	}
	db, err := sql.Open("postgres", t.db.visibilityURL)
	if err != nil {
		return redact.Error(fmt.Errorf("devstack: visibility database: %w", err), t.db.visibilityURL)
	}
	defer db.Close()
	if err := applyVisibilityIndexes(ctx, db, mode, columns, logger); err != nil {
		return redact.Error(err, t.db.visibilityURL)
	}
	return nil
}

// searchAttributeColumns are the visibility columns of the namespace's
// custom search attributes names.
func (t *Temporal) searchAttributeColumns(ctx context.Context, names []string, logger *slog.Logger) ([]string, error) {
	c, err := t.Dial(ctx, logger)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	resp, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: t.namespace})
	if err != nil {
		return nil, fmt.Errorf("devstack: describe namespace %q: %w", t.namespace, err)
	}
	fieldOf := map[string]string{}
	for field, alias := range resp.GetConfig().GetCustomSearchAttributeAliases() {
		fieldOf[alias] = field
	}
	columns := make([]string, 0, len(names))
	for _, name := range names {
		field, ok := fieldOf[name]
		if !ok {
			return nil, fmt.Errorf("devstack: search attribute %q is not registered in namespace %q", name, t.namespace)
		}
		columns = append(columns, strings.ToLower(field))
	}
	return columns, nil
}

// applyVisibilityIndexes creates the indexes of mode that are missing and,
// trimmed, drops the others of the server's schema, recording each
// definition first. Indexes that are not the schema's (an operator's own)
// are left alone. keepColumns are the search-attribute columns whose
// indexes a trim keeps.
func applyVisibilityIndexes(ctx context.Context, db *sql.DB, mode string, keepColumns []string, logger *slog.Logger) error {
	if mode != VisibilityIndexesFull && mode != VisibilityIndexesTrimmed {
		return fmt.Errorf("devstack: visibility indexes %q: want %s or %s", mode, VisibilityIndexesFull, VisibilityIndexesTrimmed)
	}
	indexes, err := visibilitySchemaIndexes()
	if err != nil {
		return err
	}
	conn, unlock, err := lockIndexes(ctx, db)
	if err != nil {
		return err
	}
	defer unlock()
	if mode == VisibilityIndexesTrimmed {
		if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+droppedIndexesTable+` (name TEXT PRIMARY KEY, definition TEXT NOT NULL)`); err != nil {
			return fmt.Errorf("devstack: visibility indexes: %w", err)
		}
	}
	valid, err := existingIndexes(ctx, conn)
	if err != nil {
		return err
	}
	created, dropped := 0, 0
	for _, idx := range indexes {
		want := mode == VisibilityIndexesFull || slices.Contains(keptVisibilityIndexes, idx.name) ||
			(idx.column != "" && slices.Contains(keepColumns, idx.column))
		isValid, exists := valid[idx.name]
		switch {
		case want && exists && isValid:
		case want:
			if exists {
				// A concurrent build that failed leaves an invalid
				// index, which IF NOT EXISTS would keep.
				if _, err := conn.ExecContext(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+idx.name); err != nil {
					return fmt.Errorf("devstack: drop invalid index %s: %w", idx.name, err)
				}
			}
			if _, err := conn.ExecContext(ctx, concurrently(idx.create)); err != nil {
				return fmt.Errorf("devstack: create index %s: %w", idx.name, err)
			}
			created++
		case exists:
			if _, err := conn.ExecContext(ctx, `INSERT INTO `+droppedIndexesTable+` (name, definition)
				SELECT $1::text, pg_get_indexdef(to_regclass($1::text)) ON CONFLICT (name) DO UPDATE SET definition = EXCLUDED.definition`, idx.name); err != nil {
				return fmt.Errorf("devstack: record index %s: %w", idx.name, err)
			}
			if _, err := conn.ExecContext(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+idx.name); err != nil {
				return fmt.Errorf("devstack: drop index %s: %w", idx.name, err)
			}
			dropped++
		}
	}
	if mode == VisibilityIndexesFull {
		// Every index of the schema is back: no record is needed any more.
		if _, err := conn.ExecContext(ctx, `DO $$ BEGIN IF to_regclass('`+droppedIndexesTable+`') IS NOT NULL THEN DELETE FROM `+droppedIndexesTable+`; END IF; END $$`); err != nil {
			return fmt.Errorf("devstack: visibility indexes: %w", err)
		}
	}
	if created+dropped > 0 {
		logger.Info("visibility indexes changed", "mode", mode, "created", created, "dropped", dropped)
	}
	return nil
}

// lockIndexes takes the advisory lock on a connection of its own, which
// the statements then use (the lock is the session's).
func lockIndexes(ctx context.Context, db *sql.DB) (*sql.Conn, func(), error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("devstack: visibility database: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, indexLockKey); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("devstack: lock the visibility indexes: %w", err)
	}
	return conn, func() {
		_, _ = conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, indexLockKey)
		conn.Close()
	}, nil
}

// existingIndexes are the visibility table's indexes, by name, and
// whether each is valid.
func existingIndexes(ctx context.Context, conn *sql.Conn) (map[string]bool, error) {
	rows, err := conn.QueryContext(ctx, `SELECT i.relname, x.indisvalid FROM pg_index x
		JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = to_regclass($1)`, visibilityTable)
	if err != nil {
		return nil, fmt.Errorf("devstack: list visibility indexes: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		var valid bool
		if err := rows.Scan(&name, &valid); err != nil {
			return nil, fmt.Errorf("devstack: list visibility indexes: %w", err)
		}
		out[name] = valid
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("devstack: list visibility indexes: %w", err)
	}
	return out, nil
}

// restoreDroppedIndexes puts back, as they were, the indexes a trim
// dropped: before a schema upgrade, whose scripts were written for the
// server's full schema. The next SetVisibilityIndexes trims again.
func restoreDroppedIndexes(ctx context.Context, db *sql.DB, logger *slog.Logger) error {
	conn, unlock, err := lockIndexes(ctx, db)
	if err != nil {
		return err
	}
	defer unlock()
	var exists bool
	if err := conn.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, droppedIndexesTable).Scan(&exists); err != nil || !exists {
		return err
	}
	rows, err := conn.QueryContext(ctx, `SELECT name, definition FROM `+droppedIndexesTable+` ORDER BY name`)
	if err != nil {
		return fmt.Errorf("devstack: dropped visibility indexes: %w", err)
	}
	defs := map[string]string{}
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			rows.Close()
			return fmt.Errorf("devstack: dropped visibility indexes: %w", err)
		}
		defs[name] = def
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("devstack: dropped visibility indexes: %w", err)
	}
	valid, err := existingIndexes(ctx, conn)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		// The record is executed as SQL: only an index of the visibility
		// table, of its own name, as pg_get_indexdef wrote it.
		if m := indexDefRe.FindStringSubmatch(defs[name]); m == nil || m[1] != name {
			return fmt.Errorf("devstack: recorded definition of index %q is not one of %s's indexes", name, visibilityTable)
		}
		if isValid, ok := valid[name]; ok && !isValid {
			if _, err := conn.ExecContext(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+pq.QuoteIdentifier(name)); err != nil {
				return fmt.Errorf("devstack: drop invalid index %s: %w", name, err)
			}
		}
		if _, err := conn.ExecContext(ctx, concurrently(defs[name])); err != nil {
			return fmt.Errorf("devstack: restore index %s before the schema upgrade: %w", name, err)
		}
		if _, err := conn.ExecContext(ctx, `DELETE FROM `+droppedIndexesTable+` WHERE name = $1`, name); err != nil {
			return fmt.Errorf("devstack: dropped visibility indexes: %w", err)
		}
	}
	if len(defs) > 0 {
		logger.Info("visibility indexes restored for the schema upgrade", "indexes", len(defs))
	}
	return nil
}

// schemaUpdatePending says whether the versioned scripts in dir of fsys go
// beyond current, the database's schema version.
func schemaUpdatePending(fsys fs.FS, dir, current string) (bool, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return false, fmt.Errorf("devstack: schema versions: %w", err)
	}
	cur, err := parseSchemaVersion(current)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		v, err := parseSchemaVersion(strings.TrimPrefix(e.Name(), "v"))
		if err == nil && e.IsDir() && slices.Compare(v, cur) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// parseSchemaVersion reads "1.14" (or "1.14.2") into its numbers.
func parseSchemaVersion(s string) ([]int, error) {
	var out []int
	for p := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, errors.New("devstack: schema version " + strconv.Quote(s))
		}
		out = append(out, n)
	}
	return out, nil
}
