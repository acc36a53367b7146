package devstack

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	enums "go.temporal.io/api/enums/v1"
)

const (
	defaultIP            = "127.0.0.1"
	defaultNamespace     = "default"
	defaultRetention     = 72 * time.Hour
	defaultHistoryShards = 1
	defaultLogLevel      = "warn"

	// clusterName is persisted in the database file; it must never change or an
	// existing DBFile would no longer match its cluster metadata.
	clusterName = "active"
	storeName   = "sqlite"

	// defaultReadyTimeout bounds the wait for the frontend, the namespace and
	// the UI when the caller's context has no deadline of its own.
	defaultReadyTimeout = time.Minute

	pollInterval = 100 * time.Millisecond
)

// defaultDynamicConfig is what a one-host server needs other than the
// server's defaults, which are a cluster's. A task queue has one partition:
// with the default four, a workflow task that found no poller waiting was
// written to one of four partitions, and the three that are not the root
// forward to it at 10 tasks a second each (matching.forwarderMaxRatePerSecond),
// so a backlog of non-eager starts drained at ~40 workflows a second.
var defaultDynamicConfig = map[string]any{
	"matching.numTaskqueueReadPartitions":  1,
	"matching.numTaskqueueWritePartitions": 1,
}

// TemporalOptions configures StartTemporal. The zero value is a usable dev
// server: in memory, on free ports, namespace "default", with the Web UI.
type TemporalOptions struct {
	// IP is the address the frontend and the UI listen on; default "127.0.0.1".
	// The other services always listen on loopback unless IP is a specific
	// non-loopback address.
	IP string
	// BroadcastAddress, with IP 0.0.0.0, is the IP the services advertise
	// to the cluster's other processes (membership), binding every
	// interface: what a container of a multi-process cluster needs. "auto"
	// takes this host's first IPv4 address that is not loopback.
	BroadcastAddress string
	// Port is the frontend gRPC port; 0 picks a free port.
	Port int
	// UIPort is the Web UI port; 0 picks a free port, -1 disables the UI.
	UIPort int
	// Namespace is registered at start; default "default".
	Namespace string
	// DBFile is the SQLite file to persist to, in WAL mode. It is created,
	// with the schema, when missing; its parent directory too. "" keeps
	// nothing: the database is a file in a directory of its own on tmpfs
	// (/dev/shm), removed at Stop, or SQLite's memory mode where there is
	// no tmpfs.
	DBFile string
	// Services, if set, are the services this process runs (frontend,
	// history, matching, worker); default all four. Processes that share
	// a Postgres store and each run some of them form one cluster,
	// finding each other through its membership table. A process without
	// the frontend reaches it at FrontendAddress, and has no UI and no
	// namespace to set up.
	Services []string
	// FrontendAddress is the cluster's frontend, for a process that does
	// not run it.
	FrontendAddress string
	// Postgres, if set, keeps Temporal's state in Postgres instead of
	// SQLite (postgres.go); DBFile is then unused.
	Postgres *PostgresStore
	// HistoryShards defaults to 1. It is fixed when a DBFile is created: on an
	// existing file the server keeps the persisted count and ignores this one.
	HistoryShards int
	// Retention is the namespace retention, default 72h. It is set explicitly
	// because a namespace created without one gets 0 s, and closed workflows
	// then vanish at once. On an existing namespace it is updated if it differs
	// (the server refuses values under 1h there).
	Retention time.Duration
	// SearchAttributes are custom search attributes the namespace is
	// created with, e.g. {"SaleId": KEYWORD}, so that every service knows
	// them from the first second. A namespace that exists already (an older
	// DBFile) is left as it is: register missing ones through the operator
	// service (worker.RegisterSearchAttributes).
	SearchAttributes map[string]enums.IndexedValueType
	// LogLevel is the minimum level of server log lines: debug, info, warn
	// (default) or error. Below warn the server logs thousands of lines.
	LogLevel string
	// Logger receives the server's log lines; nil logs text to stderr.
	Logger *slog.Logger
	// APIKey, if set, is the key a caller must present ("Authorization:
	// Bearer <key>") to call into a namespace (auth.go). The server's own
	// clients (namespace setup, the Web UI) present it too.
	APIKey string
	// UIReadOnly turns the Web UI's write actions off (cancel, terminate,
	// reset, signals, updates, starts): the UI server then refuses them,
	// whatever its pages show. For a UI that people reach without signing
	// in anywhere.
	UIReadOnly bool
	// DynamicConfig overrides server dynamic config, keyed as in the server's
	// dynamicconfig package (e.g. "frontend.rps": 10000), on top of
	// defaultDynamicConfig.
	DynamicConfig map[string]any
	// DynamicConfigFile, if set, is a dynamic-config file in the server's
	// own YAML format (frontend rate limits, history cache sizes, …): the
	// keys it sets override DynamicConfig's, and it is read again every
	// 10 s, so a change applies without a restart.
	DynamicConfigFile string
	// TLS, if set, makes the frontend serve TLS, and mutual TLS with a
	// client CA. The server's own clients (its system workers, the
	// namespace setup, the Web UI) then reach it through an internal
	// frontend on the services' address, without TLS. Every process of a
	// cluster must be given the same, so that all know of the internal
	// frontend.
	TLS *ServerTLS
	// MetricsAddress, if set, is where the server serves its own metrics
	// for Prometheus (/metrics: persistence latencies, task queue
	// backlogs, shard health); "" serves none.
	MetricsAddress string
}

// ServerTLS is the frontend's TLS: its certificate and key (PEM files),
// and the CA whose certificates clients must present (mutual TLS); no
// ClientCAFile: any client may connect, over TLS.
type ServerTLS struct {
	CertFile, KeyFile, ClientCAFile string
}

// internalFrontend says whether the server's own calls go through an
// internal frontend: when the public one wants what they do not have (a
// key, a client certificate).
func (o *TemporalOptions) internalFrontend() bool { return o.APIKey != "" || o.TLS != nil }

func (o *TemporalOptions) setDefaults() error {
	if o.IP == "" {
		o.IP = defaultIP
	}
	if o.Namespace == "" {
		o.Namespace = defaultNamespace
	}
	if o.HistoryShards == 0 {
		o.HistoryShards = defaultHistoryShards
	}
	if o.Retention == 0 {
		o.Retention = defaultRetention
	}
	if o.LogLevel == "" {
		o.LogLevel = defaultLogLevel
	}
	dc := make(map[string]any, len(defaultDynamicConfig)+len(o.DynamicConfig))
	maps.Copy(dc, defaultDynamicConfig)
	maps.Copy(dc, o.DynamicConfig)
	o.DynamicConfig = dc
	switch {
	case o.Port < 0 || o.Port > 65535:
		return fmt.Errorf("devstack: invalid frontend port %d", o.Port)
	case o.UIPort < -1 || o.UIPort > 65535:
		return fmt.Errorf("devstack: invalid UI port %d (use -1 to disable the UI)", o.UIPort)
	case len(o.Services) > 0 && !slices.Contains(o.Services, "frontend") && (o.FrontendAddress == "" || o.Postgres == nil):
		return fmt.Errorf("devstack: a process without the frontend needs a Postgres store shared with the one that runs it, and its address")
	case o.HistoryShards < 0:
		return fmt.Errorf("devstack: invalid history shard count %d", o.HistoryShards)
	case o.Retention < 0:
		return fmt.Errorf("devstack: negative retention %v", o.Retention)
	case o.TLS != nil && (o.TLS.CertFile == "" || o.TLS.KeyFile == ""):
		return fmt.Errorf("devstack: TLS needs a certificate and its key")
	}
	return nil
}
