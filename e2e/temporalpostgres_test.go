package e2e

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/testenv"
)

// Temporal on Postgres from the one binary, as a self-hosted production
// server keeps its state: `seckill temporal --postgres-url` creates the
// databases and their schemas with the server's own schema tooling, with 8
// history shards, a retention, a dynamic-config file and its own metrics,
// and serve and worker processes run the README's tour on it, through the
// default driver (pgx). The server then restarts on the existing database
// with the other driver, lib/pq (the schema step finds it current: the
// upgrade path), and the tour runs again; a change to the dynamic-config
// file applies without a restart.
func TestTemporalOnPostgres(t *testing.T) {
	dbURL := testenv.TemporalDatabaseURL(t)
	dcFile := filepath.Join(t.TempDir(), "dynamicconfig.yaml")
	writeDynamicConfig(t, dcFile, 40)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	st := newStackWith(t, testenv.StackOptions{Env: payEnv, TemporalArgs: []string{"--postgres-url", dbURL, "--history-shards", "8",
		"--retention", "48h", "--dynamic-config", dcFile, "--metrics-addr", metricsAddr}})
	run(t, "serve", st.env, "serve")
	run(t, "worker", st.env, "worker")
	waitReady(t, st.api+"/readyz", 60*time.Second)
	admin := strings.TrimSpace(st.seckill(t, "token", "--user", "ops", "--role", "admin"))
	runTour(t, st.api, admin, strings.TrimSpace(st.seckill(t, "token", "--user", "pg-tourist")))

	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var shards int
	if err := db.QueryRow("SELECT count(*) FROM shards").Scan(&shards); err != nil || shards != 8 {
		t.Fatalf("Temporal's shards in Postgres: %d (%v), want 8", shards, err)
	}

	// The server's own metrics: its persistence calls, to Postgres.
	if m := get(t, "http://"+metricsAddr+"/metrics"); !strings.Contains(m, "persistence_requests") {
		t.Fatalf("the server's metrics have no persistence_requests:\n%.2000s", m)
	}

	// The retention and the file's limit are the server's.
	tc := st.Temporal.Client()
	ns, err := tc.WorkflowService().DescribeNamespace(t.Context(), &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	if err != nil || ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration() != 48*time.Hour {
		t.Fatalf("namespace retention %v (%v), want 48h", ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(), err)
	}
	longID := "a-workflow-id-longer-than-forty-characters-" + strings.Repeat("x", 10)
	startLong := func() error {
		_, err := tc.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: longID, TaskQueue: "dynamic-config-check"}, "Nothing")
		return err
	}
	if err := startLong(); err == nil || !strings.Contains(err.Error(), "length") {
		t.Fatalf("a %d-character workflow id with limit.maxIDLength 40: %v, want refused", len(longID), err)
	}

	st.Temporal.Stop()
	st.Temporal.Args = append(slices.Clone(st.Temporal.Args), "--postgres-driver", "pq")
	st.Temporal.Start()
	waitReady(t, st.api+"/readyz", 60*time.Second)
	runTour(t, st.api, admin, strings.TrimSpace(st.seckill(t, "token", "--user", "pg-tourist-2")))

	// The file is read again while the server runs.
	writeDynamicConfig(t, dcFile, 1000)
	tc = st.Temporal.Client()
	testenv.Eventually(t, 30*time.Second, startLong)
}

// writeDynamicConfig writes a dynamic-config file in the server's format
// that limits workflow ids to maxID characters.
func writeDynamicConfig(t *testing.T, path string, maxID int) {
	t.Helper()
	yaml := fmt.Sprintf("limit.maxIDLength:\n  - value: %d\n    constraints: {}\n", maxID)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}
