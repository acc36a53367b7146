package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"time"

	"github.com/seckill/seckill/devstack"
	"github.com/seckill/seckill/worker"
	"github.com/seckill/seckill/workflows"
)

// TemporalCmd runs the embedded Temporal server alone: for tests that need a
// real server as a separate process, and for trying the worker and api
// against something that is not in their own process.
type TemporalCmd struct {
	IP            string        `name:"ip" default:"127.0.0.1" help:"Address the frontend and Web UI listen on."`
	Broadcast     string        `name:"broadcast-address" env:"SECKILL_TEMPORAL_BROADCAST_ADDRESS" help:"With --ip 0.0.0.0: the IP the services advertise to the cluster's other processes, binding every interface (a container: auto = this host's first IPv4 that is not loopback). Without it they stay on loopback."`
	Port          int           `name:"port" env:"SECKILL_TEMPORAL_PORT" default:"7233" help:"Frontend gRPC port (0 = any free port)."`
	UIPort        int           `name:"ui-port" env:"SECKILL_UI_PORT" default:"8233" help:"Web UI port (0 = any free port, -1 = no UI)."`
	Namespace     string        `name:"namespace" default:"default" help:"Namespace to create."`
	DataDir       string        `name:"data-dir" help:"Keep Temporal's state in DIR/temporal.db (default: in memory)."`
	PostgresURL   string        `name:"postgres-url" env:"SECKILL_TEMPORAL_POSTGRES_URL" secret:"url" help:"Keep Temporal's state in Postgres instead (postgres://user:pass@host:5432/temporal?sslmode=disable): the database and its schema are created, or upgraded to this server's version, on start."`
	VisibilityURL string        `name:"postgres-visibility-url" env:"SECKILL_TEMPORAL_POSTGRES_VISIBILITY_URL" secret:"url" help:"Postgres database for visibility (default: --postgres-url's database name with _visibility)."`
	PGDriver      string        `name:"postgres-driver" env:"SECKILL_TEMPORAL_POSTGRES_DRIVER" enum:"pgx,pq" default:"pgx" help:"The server's Postgres driver: pgx prepares each statement once per connection and sends it with its parameters in one round trip; pq (lib/pq) has Postgres parse and plan every statement, in two round trips when it has parameters. Behind a pooler in transaction mode (PgBouncer), which cannot keep prepared statements, use pq."`
	Services      []string      `name:"services" sep:"," enum:"frontend,history,matching,worker" default:"frontend,history,matching,worker" help:"The services this process runs: processes that share --postgres-url and run some each form one cluster."`
	FrontendAddr  string        `name:"frontend-address" help:"The cluster's frontend host:port, for a process that does not run it."`
	HistoryShards int           `name:"history-shards" env:"SECKILL_TEMPORAL_HISTORY_SHARDS" default:"1" help:"History shards, fixed when the database is created: a server given another count on an existing database refuses to start."`
	Retention     time.Duration `name:"retention" env:"SECKILL_TEMPORAL_RETENTION" default:"72h" help:"How long the namespace keeps closed workflows (at least 1h): an order's history stays in the Web UI this long after it ends."`
	DynamicConfig string        `name:"dynamic-config" type:"existingfile" env:"SECKILL_TEMPORAL_DYNAMIC_CONFIG" help:"A dynamic-config file in the Temporal server's YAML format (frontend rate limits, history cache sizes, …), read again every 10 s; its keys override seckill's defaults."`
	TLSCert       string        `name:"tls-cert" type:"existingfile" env:"SECKILL_TEMPORAL_TLS_CERT" help:"Serve the frontend over TLS with this certificate (PEM), with --tls-key; give every process of the cluster the same TLS flags."`
	TLSKey        string        `name:"tls-key" type:"existingfile" env:"SECKILL_TEMPORAL_TLS_KEY" help:"Private key (PEM) of --tls-cert."`
	TLSClientCA   string        `name:"tls-client-ca" type:"existingfile" env:"SECKILL_TEMPORAL_TLS_CLIENT_CA" help:"Require clients to present a certificate from this CA (PEM): mutual TLS, as Temporal Cloud does."`
	MetricsAddr   string        `name:"metrics-addr" env:"SECKILL_TEMPORAL_METRICS_ADDR" help:"Serve the Temporal server's own metrics for Prometheus at http://ADDR/metrics (persistence latencies, task queue backlogs, shard health); empty = none."`
	Verbose       bool          `name:"verbose" help:"Log the Temporal server at info level instead of warn."`
	APIKey        string        `name:"api-key" env:"SECKILL_TEMPORAL_SERVER_API_KEY" secret:"" help:"Refuse a namespace's calls without 'Authorization: Bearer KEY' (as Temporal Cloud does; clients pass --temporal-api-key). The Web UI presents it for the people it serves: guard the UI's own port (docker-compose.yml puts it behind the edge's sign-in)."`
	VisIndexes    string        `name:"visibility-indexes" env:"SECKILL_TEMPORAL_VISIBILITY_INDEXES" enum:"full,trimmed" default:"trimmed" help:"On Postgres, the visibility table's indexes: trimmed = only those seckill's queries and the Web UI's default list and filters use (the start/close order, WorkflowType, WorkflowId, ExecutionStatus, SaleId, OrderStatus, UserId), so that each visibility write updates 7 instead of 73 (a fifth of the WAL a paid order writes); full = the server's 73. Other filters still work, by a scan. Switching back re-creates them; an upgrade of the schema puts them back first. The process that runs the frontend applies it."`
	UIActions     string        `name:"ui-actions" env:"SECKILL_TEMPORAL_UI_ACTIONS" enum:"auto,on,off" default:"auto" help:"The Web UI's write actions (cancel, terminate, reset, updates): auto = on when the UI listens on loopback only, off (read-only) otherwise; on where an authenticating proxy guards the UI (docker-compose.yml's edge)."`
}

func (c *TemporalCmd) Run(ctx context.Context) error {
	if (c.TLSCert == "") != (c.TLSKey == "") || (c.TLSClientCA != "" && c.TLSCert == "") {
		return errors.New("--tls-cert and --tls-key go together, and --tls-client-ca needs them")
	}
	if c.Retention < time.Hour {
		return fmt.Errorf("--retention %v: the server keeps closed workflows at least 1h", c.Retention)
	}
	if c.UIPort >= 0 && c.UIActions == "auto" && !loopbackOnly(c.IP) {
		slog.Warn("the Web UI listens beyond loopback with no sign-in in front that seckill knows of: it is read-only; put an authenticating proxy in front and pass --ui-actions=on for its write actions",
			"ip", c.IP)
	}
	if c.VisIndexes == devstack.VisibilityIndexesTrimmed && c.PostgresURL == "" {
		slog.Warn("--visibility-indexes trimmed applies to Postgres only: the SQLite store keeps its indexes")
	}
	t, err := devstack.StartTemporal(ctx, c.options())
	if err != nil {
		return err
	}
	if !slices.Contains(c.Services, "frontend") {
		fmt.Printf("temporal ready %s ui \n", c.FrontendAddr)
		slog.Info("temporal services ready", "services", c.Services, "frontend", c.FrontendAddr)
		<-ctx.Done()
		return t.Stop()
	}
	// A namespace the server creates has them already; one in an older
	// --data-dir database may lack them.
	if err := registerSearchAttributes(ctx, t); err != nil {
		_ = t.Stop()
		return err
	}
	// After the search attributes: a trim keeps the indexes of their
	// columns, which the namespace maps them to.
	if err := t.SetVisibilityIndexes(ctx, c.VisIndexes, workflows.FilteredSearchAttributes, slog.Default().With("component", "temporal-server")); err != nil {
		_ = t.Stop()
		return err
	}
	// Tests wait for this line: the server is ready, with its namespace and
	// search attributes.
	fmt.Printf("temporal ready %s ui %s\n", t.FrontendAddress(), t.UIURL())
	slog.Info("temporal dev server ready", "frontend", t.FrontendAddress(), "ui", t.UIURL(), "namespace", t.Namespace())
	<-ctx.Done()
	return t.Stop()
}

func (c *TemporalCmd) options() devstack.TemporalOptions {
	opts := devstack.TemporalOptions{
		IP:               c.IP,
		BroadcastAddress: c.Broadcast,
		Port:             c.Port,
		UIPort:           c.UIPort,
		Namespace:        c.Namespace,
		HistoryShards:    c.HistoryShards,
		SearchAttributes: workflows.SearchAttributeTypes,
		LogLevel:         "warn",
		// The process's own logger: --log-format and --log-level apply.
		Logger:            slog.Default().With("component", "temporal-server"),
		APIKey:            c.APIKey,
		Retention:         c.Retention,
		DynamicConfigFile: c.DynamicConfig,
		MetricsAddress:    c.MetricsAddr,
		UIReadOnly:        !uiActionsOn(c.UIActions, c.IP),
	}
	if c.TLSCert != "" {
		opts.TLS = &devstack.ServerTLS{CertFile: c.TLSCert, KeyFile: c.TLSKey, ClientCAFile: c.TLSClientCA}
	}
	if c.Verbose {
		opts.LogLevel = "info"
	}
	if c.DataDir != "" {
		opts.DBFile = filepath.Join(c.DataDir, "temporal.db")
	}
	opts.Services, opts.FrontendAddress = c.Services, c.FrontendAddr
	if c.PostgresURL != "" {
		opts.Postgres = &devstack.PostgresStore{URL: c.PostgresURL, VisibilityURL: c.VisibilityURL, Driver: c.PGDriver}
	}
	return opts
}

func registerSearchAttributes(ctx context.Context, t *devstack.Temporal) error {
	c, err := t.Dial(ctx, slog.Default().With("component", "temporal-sdk"))
	if err != nil {
		return fmt.Errorf("temporal client: %w", err)
	}
	defer c.Close()
	return worker.RegisterSearchAttributes(ctx, c, t.Namespace())
}

// uiActionsOn decides --ui-actions: auto lets a UI that only this machine
// can reach keep its write actions (seckill dev, tests), and makes one that
// listens on a network read-only, since the UI server has no sign-in of
// its own and, with --api-key, acts with the server's key.
func uiActionsOn(setting, ip string) bool {
	switch setting {
	case "on":
		return true
	case "off":
		return false
	}
	return loopbackOnly(ip)
}

// loopbackOnly reports whether a listen address (an IP, "localhost" or
// empty for the default 127.0.0.1) reaches only this machine.
func loopbackOnly(ip string) bool {
	if ip == "" || ip == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(ip)
	return err == nil && a.IsLoopback()
}
