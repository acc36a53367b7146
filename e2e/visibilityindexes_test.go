package e2e

import (
	"database/sql"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	serverschema "go.temporal.io/server/schema"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/reconcile"
	"github.com/seckill/seckill/workflows"
)

// `seckill temporal --visibility-indexes trimmed` on Postgres leaves the
// visibility table with the indexes seckill's queries and the Web UI's
// defaults use, those of SaleId, OrderStatus and UserId found through the
// namespace's mapping; seckill's visibility queries (the stranded repair,
// the audit's count, lists by type and status) still answer right; a
// restart that upgrades the schema (its version set back one step) puts
// the dropped indexes back for the upgrade and trims again; and full
// re-creates every index of the server's schema.
func TestTemporalVisibilityIndexesTrimmed(t *testing.T) {
	dbURL := testenv.TemporalDatabaseURL(t)
	tp := testenv.NewTemporal(t)
	tp.Args = []string{"--postgres-url", dbURL, "--visibility-indexes", "trimmed"}
	tp.Start()
	tc := tp.Client()
	ctx := t.Context()

	vis, err := sql.Open("postgres", strings.Replace(dbURL, "?", "_visibility?", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer vis.Close()

	// The indexes of the search attributes' columns, by the server's
	// naming (Keyword01 → by_keyword_01).
	ns, err := tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"by_status", "by_workflow_id", "by_workflow_type", "default_idx", "executions_visibility_pkey"}
	for field, alias := range ns.GetConfig().GetCustomSearchAttributeAliases() {
		if slices.Contains(workflows.FilteredSearchAttributes, alias) {
			n := strings.TrimPrefix(field, "Keyword")
			want = append(want, "by_keyword_"+n)
		}
	}
	slices.Sort(want)
	if len(want) != 8 {
		t.Fatalf("SaleId, OrderStatus and UserId not all keyword columns: %v", ns.GetConfig().GetCustomSearchAttributeAliases())
	}
	if got := visibilityIndexes(t, vis); !slices.Equal(got, want) {
		t.Fatalf("trimmed: indexes %v, want %v", got, want)
	}

	// Orders of two sales, no worker: each stays as started until
	// terminated.
	sale, other := time.Now().UnixNano()%1_000_000_000, time.Now().UnixNano()%1_000_000_000+1
	start := func(id, saleID int64, status domain.Status) {
		t.Helper()
		ref := domain.OrderRef{OrderID: id, SaleID: saleID, UserID: fmt.Sprintf("u%d", id)}
		_, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("order-%d", id), TaskQueue: "visibility-indexes-no-worker",
			TypedSearchAttributes: workflows.SearchAttributes(ref, status),
		}, "OrderWorkflow", workflows.OrderInput{Order: ref})
		if err != nil {
			t.Fatal(err)
		}
	}
	terminate := func(id int64) {
		t.Helper()
		if err := tc.TerminateWorkflow(ctx, fmt.Sprintf("order-%d", id), "", "test"); err != nil {
			t.Fatal(err)
		}
	}
	base := sale * 10
	start(base+1, sale, domain.StatusPending)
	start(base+2, sale, domain.StatusAwaitingPayment)
	start(base+3, sale, domain.StatusPaid)
	start(base+4, sale, domain.StatusPending) // stays running
	start(base+5, other, domain.StatusPending)
	for _, id := range []int64{base + 1, base + 2, base + 3, base + 5} {
		terminate(id)
	}

	st := testenv.Store(t)
	count := func(query string) (int64, error) {
		resp, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		return resp.GetCount(), err
	}
	checkQueries := func() {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, func() error {
			for q, n := range map[string]int64{
				"WorkflowType = 'OrderWorkflow'":   5,
				"OrderStatus = 'PAID'":             1,
				fmt.Sprintf("SaleId = '%d'", sale): 4,
				// The audit's count of a sale's open workflows.
				fmt.Sprintf("SaleId = '%d' AND ExecutionStatus = 'Running'", sale):    1,
				fmt.Sprintf("SaleId = '%d' AND ExecutionStatus = 'Terminated'", sale): 3,
			} {
				if got, err := count(q); err != nil || got != n {
					return fmt.Errorf("count %q: %d (%v), want %d", q, got, err, n)
				}
			}
			// The stranded repair: closed while PENDING or AWAITING_PAYMENT,
			// with no row.
			of, err := reconcile.FindStranded(ctx, tc, st, nil, sale)
			if err != nil || len(of) != 2 {
				return fmt.Errorf("stranded of sale %d: %d (%v), want 2", sale, len(of), err)
			}
			all, err := reconcile.FindStranded(ctx, tc, st, nil, 0)
			if err != nil || len(all) != 3 {
				return fmt.Errorf("stranded: %d (%v), want 3", len(all), err)
			}
			list, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Query: fmt.Sprintf("SaleId = '%d' AND OrderStatus = 'PENDING'", sale)})
			if err != nil || len(list.GetExecutions()) != 2 {
				return fmt.Errorf("list of sale %d's PENDING: %d (%v), want 2", sale, len(list.GetExecutions()), err)
			}
			return nil
		})
	}
	checkQueries()

	// A restart that has a schema upgrade to run: the version set back a
	// step, so that v1.14's script runs again.
	tp.Stop()
	if _, err := vis.Exec(`UPDATE schema_version SET curr_version = '1.13'`); err != nil {
		t.Fatal(err)
	}
	tp.Start()
	var version string
	if err := vis.QueryRow(`SELECT curr_version FROM schema_version`).Scan(&version); err != nil || version != "1.14" {
		t.Fatalf("schema version after the restart: %q (%v), want 1.14", version, err)
	}
	if got := visibilityIndexes(t, vis); !slices.Equal(got, want) {
		t.Fatalf("trimmed after an upgrade: indexes %v, want %v", got, want)
	}
	start(base+6, sale, domain.StatusPaid)
	testenv.Eventually(t, 30*time.Second, func() error {
		if got, err := count("OrderStatus = 'PAID'"); err != nil || got != 2 {
			return fmt.Errorf("PAID after the restart: %d (%v), want 2", got, err)
		}
		return nil
	})

	tp.Stop()
	tp.Args = []string{"--postgres-url", dbURL, "--visibility-indexes", "full"}
	tp.Start()
	full := append(schemaIndexNames(t), "executions_visibility_pkey")
	slices.Sort(full)
	if got := visibilityIndexes(t, vis); !slices.Equal(got, full) {
		t.Fatalf("full: %d indexes %v, want the schema's %d", len(got), got, len(full))
	}
}

// visibilityIndexes are the valid indexes of executions_visibility, sorted.
func visibilityIndexes(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
		WHERE x.indrelid = 'executions_visibility'::regclass AND x.indisvalid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// schemaIndexNames are the indexes the server's own visibility schema
// creates.
func schemaIndexNames(t *testing.T) []string {
	t.Helper()
	body, err := fs.ReadFile(serverschema.Assets(), "postgresql/v12/visibility/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^CREATE INDEX (\w+)`).FindAllStringSubmatch(string(body), -1) {
		names[m[1]] = true
	}
	return slices.Sorted(maps.Keys(names))
}
