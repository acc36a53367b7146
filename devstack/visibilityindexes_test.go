package devstack

import (
	"database/sql"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"go.temporal.io/server/common/log"
	serverschema "go.temporal.io/server/schema"

	"github.com/seckill/seckill/internal/testenv"
)

// A trimmed visibility table goes through a schema upgrade whose script
// drops an index the trim dropped, without IF EXISTS (as Temporal's v1.6
// script did for by_root_workflow_id): the dropped indexes are put back
// before the upgrade, so the script runs on the schema it was written
// for, and the next trim drops them again. A start with no upgrade to run
// leaves the trim alone; full puts every index of the schema back.
func TestVisibilityIndexesTrimSurvivesAnUpgradeThatDropsAnIndex(t *testing.T) {
	visURL, err := PostgresStore{URL: testenv.TemporalDatabaseURL(t)}.visibilityURL()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := postgresSQL(visURL, DriverPGX)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("postgres", visURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, logger := t.Context(), slog.New(slog.DiscardHandler)
	restore := func() error { return restoreDroppedIndexesAt(visURL, logger) }
	embedded := embeddedSchema(postgresVisibilitySchema)
	if err := ensurePostgresSchema(cfg, embedded, restore, log.NewNoopLogger()); err != nil {
		t.Fatal(err)
	}
	full := indexNames(t, db)
	schemaIdx, err := visibilitySchemaIndexes()
	if err != nil {
		t.Fatal(err)
	}
	if len(schemaIdx) != 73 || len(full) != len(schemaIdx)+1 {
		t.Fatalf("a new visibility database has %d indexes, the schema defines %d; want 73 and the primary key", len(full), len(schemaIdx))
	}

	trimmed := []string{"by_keyword_01", "by_keyword_03", "by_status", "by_workflow_id", "by_workflow_type", "default_idx", "executions_visibility_pkey"}
	trim := func() {
		t.Helper()
		if err := applyVisibilityIndexes(ctx, db, VisibilityIndexesTrimmed, []string{"keyword01", "keyword03"}, logger); err != nil {
			t.Fatal(err)
		}
		if got := indexNames(t, db); !slices.Equal(got, trimmed) {
			t.Fatalf("trimmed indexes %v, want %v", got, trimmed)
		}
	}
	trim()
	trim() // again: nothing to do

	// A restart with no upgrade to run keeps the trim.
	if err := ensurePostgresSchema(cfg, embedded, restore, log.NewNoopLogger()); err != nil {
		t.Fatal(err)
	}
	if got := indexNames(t, db); !slices.Equal(got, trimmed) {
		t.Fatalf("after a start without upgrade: %v, want %v", got, trimmed)
	}

	// A newer server's schema: the embedded scripts and one more version
	// that redefines by_keyword_05.
	dir := t.TempDir()
	versioned := path.Join(postgresVisibilitySchema, "versioned")
	sub, err := fs.Sub(serverschema.Assets(), versioned)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, sub); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "v1.15"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "v1.15", "manifest.json"),
		`{"CurrVersion": "1.15", "MinCompatibleVersion": "0.1", "Description": "redefine by_keyword_05", "SchemaUpdateCqlFiles": ["keyword05.sql"]}`)
	writeFile(t, filepath.Join(dir, "v1.15", "keyword05.sql"), "DROP INDEX by_keyword_05;\n"+
		"CREATE INDEX by_keyword_05 ON executions_visibility (namespace_id, Keyword05, (COALESCE(close_time, '9999-12-31 23:59:59')) DESC, start_time DESC, run_id);\n")
	if err := ensurePostgresSchema(cfg, schemaSource{dir: dir}, restore, log.NewNoopLogger()); err != nil {
		t.Fatalf("upgrade of a trimmed visibility schema: %v", err)
	}
	var version string
	if err := db.QueryRow(`SELECT curr_version FROM schema_version`).Scan(&version); err != nil || version != "1.15" {
		t.Fatalf("schema version %q (%v), want 1.15", version, err)
	}
	if got := indexNames(t, db); !slices.Equal(got, full) {
		t.Fatalf("after the upgrade: %d indexes, want the %d of the full schema", len(got), len(full))
	}
	trim()

	if err := applyVisibilityIndexes(ctx, db, VisibilityIndexesFull, nil, logger); err != nil {
		t.Fatal(err)
	}
	if got := indexNames(t, db); !slices.Equal(got, full) {
		t.Fatalf("full again: %v, want %v", got, full)
	}
	var records int
	if err := db.QueryRow(`SELECT count(*) FROM ` + droppedIndexesTable).Scan(&records); err != nil || records != 0 {
		t.Fatalf("%d dropped indexes still recorded (%v), want none", records, err)
	}

	// A record is executed only if it is one index of the table, of the
	// record's name.
	for _, def := range []string{
		`CREATE INDEX by_bool_01 ON public.executions_visibility USING btree (namespace_id); DROP TABLE executions_visibility`,
		`CREATE INDEX someone_elses ON public.executions_visibility USING btree (namespace_id)`,
	} {
		if _, err := db.Exec(`INSERT INTO `+droppedIndexesTable+` VALUES ('by_bool_01', $1) ON CONFLICT (name) DO UPDATE SET definition = $1`, def); err != nil {
			t.Fatal(err)
		}
		if err := restoreDroppedIndexes(ctx, db, logger); err == nil {
			t.Fatalf("recorded definition %q restored", def)
		}
		if got := indexNames(t, db); !slices.Equal(got, full) {
			t.Fatalf("after a refused record: %v, want %v", got, full)
		}
	}
}

// indexNames are the valid indexes of the visibility table, sorted.
func indexNames(t *testing.T, db *sql.DB) []string {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	valid, err := existingIndexes(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	maps.DeleteFunc(valid, func(_ string, ok bool) bool { return !ok })
	return slices.Sorted(maps.Keys(valid))
}

func writeFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
