package e2e

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// Temporal on Postgres from the one binary, as a self-hosted production
// server keeps its state: `seckill temporal --postgres-url` creates the
// databases and their schemas with the server's own schema tooling, with
// 8 history shards, and serve and worker processes run the README's tour on
// it. The server then restarts on the existing database (the schema step
// finds it current: the upgrade path) and the tour runs again.
func TestTemporalOnPostgres(t *testing.T) {
	dbURL := testenv.TemporalDatabaseURL(t)
	st := newStackWith(t, testenv.StackOptions{TemporalArgs: []string{"--postgres-url", dbURL, "--history-shards", "8"}})
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

	st.Temporal.Stop()
	st.Temporal.Start()
	waitReady(t, st.api+"/readyz", 60*time.Second)
	runTour(t, st.api, admin, strings.TrimSpace(st.seckill(t, "token", "--user", "pg-tourist-2")))
}
