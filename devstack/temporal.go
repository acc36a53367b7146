package devstack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
	enums "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/metrics"
	persistencesql "go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/resolver"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"
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

	// namespaceRefreshWait covers one refresh of the namespace registry of the
	// history and matching services (system.namespaceCacheRefreshInterval, 2 s
	// by default). A search attribute added through the operator service becomes
	// visible on the frontend at once but is only accepted by history, which
	// validates UpsertSearchAttributes, after that refresh.
	namespaceRefreshWait = 2500 * time.Millisecond

	pollInterval = 100 * time.Millisecond
)

// TemporalOptions configures StartTemporal. The zero value is a usable dev
// server: in memory, on free ports, namespace "default", with the Web UI.
type TemporalOptions struct {
	// IP is the address the frontend and the UI listen on; default "127.0.0.1".
	// The other services always listen on loopback unless IP is a specific
	// non-loopback address.
	IP string
	// Port is the frontend gRPC port; 0 picks a free port.
	Port int
	// UIPort is the Web UI port; 0 picks a free port, -1 disables the UI.
	UIPort int
	// Namespace is registered at start; default "default".
	Namespace string
	// DBFile is the SQLite file to persist to ("" = in memory). It is created,
	// with the schema, when missing; its parent directory too.
	DBFile string
	// HistoryShards defaults to 1. It is fixed when a DBFile is created: on an
	// existing file the server keeps the persisted count and ignores this one.
	HistoryShards int
	// Retention is the namespace retention, default 72h. It is set explicitly
	// because a namespace created without one gets 0 s, and closed workflows
	// then vanish at once. On an existing namespace it is updated if it differs
	// (the server refuses values under 1h there).
	Retention time.Duration
	// SearchAttributes are custom search attributes to register on the
	// namespace, e.g. {"SaleId": KEYWORD}.
	SearchAttributes map[string]enums.IndexedValueType
	// LogLevel is the minimum level of server log lines: debug, info, warn
	// (default) or error. Below warn the server logs thousands of lines.
	LogLevel string
	// Logger receives the server's log lines; nil logs text to stderr.
	Logger *slog.Logger
	// DynamicConfig overrides server dynamic config, keyed as in the server's
	// dynamicconfig package (e.g. "frontend.rps": 10000).
	DynamicConfig map[string]any
}

// Temporal is a running in-process Temporal server, with its Web UI unless
// disabled. Stop it with Stop.
type Temporal struct {
	server    temporal.Server
	ui        *uiserver.Server
	uiDone    chan struct{}
	frontend  string
	uiURL     string
	namespace string
	// quiet silences the server's log once Stop begins: while its services
	// shut down one by one, the remaining ones log dozens of expected errors
	// ("Not enough hosts to serve the request", failed polls, dial errors).
	quiet *atomic.Bool

	stopOnce sync.Once
	stopErr  error
}

// memDBSeq makes the names of in-memory databases unique in the process: the
// SQLite plugin shares one connection per DSN, so two servers with the same
// in-memory name would share (and corrupt) one database.
var memDBSeq atomic.Int64

// StartTemporal starts a Temporal server and, unless opts.UIPort is -1, its Web
// UI. It returns once the frontend answers, the namespace and the search
// attributes are registered (idempotently, so an existing DBFile is fine) and
// the UI serves. ctx bounds that wait; without a deadline it is one minute.
func StartTemporal(ctx context.Context, opts TemporalOptions) (*Temporal, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	level, err := parseLevel(opts.LogLevel)
	if err != nil {
		return nil, err
	}
	base := opts.Logger
	if base == nil {
		base = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	logger := slog.New(levelHandler{min: level, next: base.Handler()}).With("component", "temporal")

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultReadyTimeout)
		defer cancel()
	}

	hosts, err := resolveHosts(opts.IP)
	if err != nil {
		return nil, err
	}

	// Ports are held open until just before the server binds them, so that the
	// free ones picked here are not handed out twice, and so that a taken port
	// is reported as an error: the server itself panics or exits on it.
	var serverPorts, uiPorts reservation
	defer serverPorts.release()
	defer uiPorts.release()

	frontendPort, err := serverPorts.take(opts.IP, opts.Port)
	if err != nil {
		return nil, fmt.Errorf("devstack: frontend port: %w", err)
	}
	frontendAddr := net.JoinHostPort(hosts.dial, strconv.Itoa(frontendPort))
	uiPort := 0
	if opts.UIPort >= 0 {
		if uiPort, err = uiPorts.take(opts.IP, opts.UIPort); err != nil {
			return nil, fmt.Errorf("devstack: UI port: %w", err)
		}
	}
	services, err := serviceConfigs(&serverPorts, opts.IP, hosts.internal, frontendPort)
	if err != nil {
		return nil, err
	}

	sqlCfg, err := prepareDatabase(ctx, opts)
	if err != nil {
		return nil, err
	}

	cfg := serverConfig(opts, sqlCfg, services, hosts.internal, frontendAddr)
	dc := make(dynamicconfig.StaticClient, len(opts.DynamicConfig))
	for k, v := range opts.DynamicConfig {
		dc[dynamicconfig.MakeKey(k)] = v
	}
	quiet := new(atomic.Bool)
	srvLogger := serverLogger{l: logger, quiet: quiet}

	serverPorts.release()
	var srv temporal.Server
	err = recoverFatal(func() error {
		var err error
		srv, err = temporal.NewServer(
			temporal.WithConfig(cfg),
			temporal.ForServices(temporal.DefaultServices),
			temporal.WithLogger(srvLogger),
			temporal.WithDynamicConfigClient(dc),
			// A dev server has no auth; say so rather than rely on nil meaning "off".
			temporal.WithAuthorizer(authorization.NewNoopAuthorizer()),
			temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper {
				return authorization.NewNoopClaimMapper()
			}),
		)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("devstack: create temporal server: %w", err)
	}
	if err := recoverFatal(srv.Start); err != nil {
		_ = recoverFatal(srv.Stop)
		return nil, fmt.Errorf("devstack: start temporal server: %w", err)
	}

	t := &Temporal{server: srv, frontend: frontendAddr, namespace: opts.Namespace, quiet: quiet}
	if err := t.configure(ctx, opts, logger); err != nil {
		_ = t.Stop()
		return nil, err
	}
	if opts.UIPort >= 0 {
		if err := t.startUI(ctx, &uiPorts, opts, hosts, uiPort, logger); err != nil {
			_ = t.Stop()
			return nil, err
		}
	}
	return t, nil
}

// FrontendAddress is the host:port SDK clients dial, e.g. "127.0.0.1:7233".
func (t *Temporal) FrontendAddress() string { return t.frontend }

// UIURL is the Web UI's base URL, e.g. "http://127.0.0.1:8233", or "" when the
// UI is disabled.
func (t *Temporal) UIURL() string { return t.uiURL }

// Namespace is the namespace registered at start.
func (t *Temporal) Namespace() string { return t.namespace }

// Stop stops the UI and the server and releases their ports. It is safe to
// call more than once; later calls return the first call's result.
func (t *Temporal) Stop() error {
	t.stopOnce.Do(func() {
		if t.ui != nil {
			t.ui.Stop()
			<-t.uiDone
		}
		t.quiet.Store(true)
		if err := recoverFatal(t.server.Stop); err != nil {
			t.stopErr = fmt.Errorf("devstack: stop temporal server: %w", err)
		}
	})
	return t.stopErr
}

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
	switch {
	case o.Port < 0 || o.Port > 65535:
		return fmt.Errorf("devstack: invalid frontend port %d", o.Port)
	case o.UIPort < -1 || o.UIPort > 65535:
		return fmt.Errorf("devstack: invalid UI port %d (use -1 to disable the UI)", o.UIPort)
	case o.HistoryShards < 0:
		return fmt.Errorf("devstack: invalid history shard count %d", o.HistoryShards)
	case o.Retention < 0:
		return fmt.Errorf("devstack: negative retention %v", o.Retention)
	}
	return nil
}

// hostSet says where to reach what listens on the configured IP.
type hostSet struct {
	dial     string // host clients dial to reach the frontend and the UI
	internal string // host the other services bind and advertise in membership
}

func resolveHosts(ipStr string) (hostSet, error) {
	ip := net.ParseIP(ipStr)
	if ip == nil {
		return hostSet{}, fmt.Errorf("devstack: invalid IP %q", ipStr)
	}
	switch {
	case ip.IsUnspecified():
		return hostSet{dial: defaultIP, internal: defaultIP}, nil
	case ip.IsLoopback():
		return hostSet{dial: ipStr, internal: defaultIP}, nil
	default:
		// Membership advertises one broadcast address for all services, so on a
		// specific interface every service must listen there.
		return hostSet{dial: ipStr, internal: ipStr}, nil
	}
}

// reservation holds listeners that keep ports busy until release.
type reservation struct{ listeners []net.Listener }

// take reserves port on ip, or a free port when port is 0.
func (r *reservation) take(ip string, port int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		if port != 0 {
			return 0, fmt.Errorf("port %d on %s is not free: %w", port, ip, err)
		}
		return 0, fmt.Errorf("pick a free port on %s: %w", ip, err)
	}
	r.listeners = append(r.listeners, l)
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (r *reservation) release() {
	for _, l := range r.listeners {
		_ = l.Close()
	}
	r.listeners = nil
}

// serviceConfigs gives every service its own free gRPC and membership ports
// (never the usual 7234/7235/6933…), so that servers do not collide.
func serviceConfigs(ports *reservation, frontendIP, internalIP string, frontendPort int) (map[string]config.Service, error) {
	services := make(map[string]config.Service, 4)
	for _, name := range []string{"frontend", "history", "matching", "worker"} {
		bindIP, grpcPort := internalIP, 0
		var err error
		if name == "frontend" {
			bindIP, grpcPort = frontendIP, frontendPort
		} else if grpcPort, err = ports.take(bindIP, 0); err != nil {
			return nil, fmt.Errorf("devstack: %s gRPC port: %w", name, err)
		}
		membershipPort, err := ports.take(bindIP, 0)
		if err != nil {
			return nil, fmt.Errorf("devstack: %s membership port: %w", name, err)
		}
		services[name] = config.Service{RPC: config.RPC{
			GRPCPort:       grpcPort,
			MembershipPort: membershipPort,
			BindOnIP:       bindIP,
		}}
	}
	return services, nil
}

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

	ns, err := sqliteschema.NewNamespaceConfig(clusterName, opts.Namespace, false, opts.SearchAttributes)
	if err != nil {
		return nil, fmt.Errorf("devstack: namespace %q: %w", opts.Namespace, err)
	}
	// Pre-registering the search attributes here (as well as through the
	// operator service later) means every service knows them from the first
	// second, with no wait for namespace caches to refresh.
	ns.Detail.Config.Retention = durationpb.New(opts.Retention)
	if err := sqliteschema.CreateNamespaces(sqlCfg, ns); err != nil {
		return nil, fmt.Errorf("devstack: create namespace %q: %w", opts.Namespace, err)
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

func serverConfig(opts TemporalOptions, sqlCfg *config.SQL, services map[string]config.Service, internalIP, frontendAddr string) *config.Config {
	return &config.Config{
		Global: config.Global{
			// No metrics or pprof listeners: a nil metrics config is a no-op
			// handler, and pprof port 0 is off. Fewer ports, fewer collisions.
			Membership: config.Membership{
				MaxJoinDuration:  30 * time.Second,
				BroadcastAddress: internalIP,
			},
		},
		Persistence: config.Persistence{
			DefaultStore:     storeName,
			VisibilityStore:  storeName,
			NumHistoryShards: int32(opts.HistoryShards),
			DataStores:       map[string]config.DataStore{storeName: {SQL: sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			EnableGlobalNamespace:    false,
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontendAddr},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services:            services,
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		// The server's own system workers dial the frontend through this.
		PublicClient: config.PublicClient{HostPort: frontendAddr},
	}
}

// configure waits for the frontend, then makes the namespace's retention and
// search attributes match opts, which matters for an existing DBFile.
func (t *Temporal) configure(ctx context.Context, opts TemporalOptions, logger *slog.Logger) error {
	c, err := dialFrontend(ctx, t.frontend, t.namespace, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := ensureRetention(ctx, c, t.namespace, opts.Retention); err != nil {
		return err
	}
	return ensureSearchAttributes(ctx, c, t.namespace, opts.SearchAttributes)
}

func dialFrontend(ctx context.Context, addr, namespace string, logger *slog.Logger) (client.Client, error) {
	for {
		c, err := client.DialContext(ctx, client.Options{
			HostPort:  addr,
			Namespace: namespace,
			Logger:    sdklog.NewStructuredLogger(logger),
		})
		if err == nil {
			return c, nil
		}
		if werr := sleepCtx(ctx, pollInterval); werr != nil {
			return nil, fmt.Errorf("devstack: frontend %s not answering: %w", addr, err)
		}
	}
}

func ensureRetention(ctx context.Context, c client.Client, namespace string, retention time.Duration) error {
	resp, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("devstack: describe namespace %q: %w", namespace, err)
	}
	if resp.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration() == retention {
		return nil
	}
	_, err = c.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
		Namespace: namespace,
		Config:    &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(retention)},
	})
	if err != nil {
		return fmt.Errorf("devstack: set retention of namespace %q to %v: %w", namespace, retention, err)
	}
	return nil
}

// ensureSearchAttributes registers the missing search attributes through the
// operator service and waits until the frontend lists all of them.
func ensureSearchAttributes(ctx context.Context, c client.Client, namespace string, want map[string]enums.IndexedValueType) error {
	if len(want) == 0 {
		return nil
	}
	missing, err := missingSearchAttributes(ctx, c, namespace, want)
	if err != nil || len(missing) == 0 {
		return err
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: missing,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("devstack: add search attributes to %q: %w", namespace, err)
	}
	for {
		left, err := missingSearchAttributes(ctx, c, namespace, want)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			break
		}
		if err := sleepCtx(ctx, pollInterval); err != nil {
			return fmt.Errorf("devstack: search attributes %v not visible: %w", keys(left), err)
		}
	}
	// The frontend lists them now; history accepts them one refresh later.
	if err := sleepCtx(ctx, namespaceRefreshWait); err != nil {
		return fmt.Errorf("devstack: wait for search attributes: %w", err)
	}
	return nil
}

// missingSearchAttributes lists the wanted attributes the namespace lacks, and
// fails on one registered with another type, which cannot be fixed in place.
func missingSearchAttributes(ctx context.Context, c client.Client, namespace string, want map[string]enums.IndexedValueType) (map[string]enums.IndexedValueType, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("devstack: list search attributes of %q: %w", namespace, err)
	}
	missing := make(map[string]enums.IndexedValueType)
	for name, typ := range want {
		got, ok := resp.GetCustomAttributes()[name]
		if !ok {
			if _, system := resp.GetSystemAttributes()[name]; system {
				return nil, fmt.Errorf("devstack: %q is a system search attribute", name)
			}
			missing[name] = typ
			continue
		}
		if got != typ {
			return nil, fmt.Errorf("devstack: search attribute %q exists in %q as %v, not %v", name, namespace, got, typ)
		}
	}
	return missing, nil
}

func (t *Temporal) startUI(ctx context.Context, ports *reservation, opts TemporalOptions, hosts hostSet, port int, logger *slog.Logger) error {
	cfg := &uiconfig.Config{
		TemporalGRPCAddress: t.frontend,
		Host:                opts.IP,
		Port:                port,
		EnableUI:            true,
		DefaultNamespace:    t.namespace,
		// Plain HTTP on a dev box: the CSRF cookie must not require HTTPS.
		CORS:     uiconfig.CORS{CookieInsecure: true},
		HideLogs: true,
		// Offline-friendly: no fetching of news from temporal.io.
		DisableNewsFetch: true,
	}
	var ui *uiserver.Server
	if err := recoverFatal(func() error {
		ui = uiserver.NewServer(uioptions.WithConfigProvider(cfg))
		return nil
	}); err != nil {
		return fmt.Errorf("devstack: create UI server: %w", err)
	}

	// ui.Start listens by itself (and exits the process if it cannot), so the
	// reserved port is freed only now, right before it binds.
	ports.release()
	t.ui, t.uiDone = ui, make(chan struct{})
	go func() {
		defer close(t.uiDone)
		if err := ui.Start(); err != nil {
			logger.Error("temporal UI server stopped", "error", err)
		}
	}()

	base := "http://" + net.JoinHostPort(hosts.dial, strconv.Itoa(port))
	if err := waitHTTP(ctx, base+"/healthz"); err != nil {
		return fmt.Errorf("devstack: UI at %s not answering: %w", base, err)
	}
	t.uiURL = base
	return nil
}

func waitHTTP(ctx context.Context, url string) error {
	hc := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if werr := sleepCtx(ctx, pollInterval); werr != nil {
			return fmt.Errorf("%w (last: %w)", werr, err)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

func keys(m map[string]enums.IndexedValueType) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// fatalPanic is what serverLogger panics with on Fatal and Panic; being an
// error, it ends up wrapped in the error recoverFatal returns.
type fatalPanic struct{ msg string }

func (f fatalPanic) Error() string { return f.msg }

// recoverFatal runs fn and turns a panic, typically serverLogger.Fatal's on a
// port the server could not bind, into an error instead of a crashed process.
// Where the server logs Fatal in a background goroutine, the process still dies.
func recoverFatal(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = fmt.Errorf("panic: %w", e)
				return
			}
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("devstack: unknown log level %q (want debug, info, warn or error)", s)
}

// levelHandler drops records below min before they reach next, whatever level
// next itself is set to: the caller's logger may well be at debug.
type levelHandler struct {
	min  slog.Level
	next slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.next.Enabled(ctx, l)
}

func (h levelHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.next.Handle(ctx, r)
}

func (h levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelHandler{min: h.min, next: h.next.WithAttrs(attrs)}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{min: h.min, next: h.next.WithGroup(name)}
}

// serverLogger adapts a *slog.Logger to the server's log.Logger.
type serverLogger struct {
	l     *slog.Logger
	quiet *atomic.Bool // set: drop everything, the server is stopping
}

var (
	_ log.Logger     = serverLogger{}
	_ log.WithLogger = serverLogger{}
)

func (s serverLogger) Debug(msg string, tags ...tag.Tag) { s.log(slog.LevelDebug, msg, tags) }
func (s serverLogger) Info(msg string, tags ...tag.Tag)  { s.log(slog.LevelInfo, msg, tags) }
func (s serverLogger) Warn(msg string, tags ...tag.Tag)  { s.log(slog.LevelWarn, msg, tags) }
func (s serverLogger) Error(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

// DPanic panics only in the server's development builds; log it as an error.
func (s serverLogger) DPanic(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

func (s serverLogger) Panic(msg string, tags ...tag.Tag) {
	s.log(slog.LevelError, msg, tags)
	panic(fatalPanic{msg: msg})
}

// Fatal panics instead of exiting as the server's zap logger does, so that a
// fatal error during NewServer or Start comes back from StartTemporal as an
// error. The server's code after Fatal assumes it does not return.
func (s serverLogger) Fatal(msg string, tags ...tag.Tag) {
	s.log(slog.LevelError, msg, tags)
	panic(fatalPanic{msg: msg + tagSummary(tags)})
}

func (s serverLogger) With(tags ...tag.Tag) log.Logger {
	args := make([]any, 0, len(tags))
	for _, t := range tags {
		args = append(args, slog.Any(t.Key(), t.Value()))
	}
	return serverLogger{l: s.l.With(args...), quiet: s.quiet}
}

func (s serverLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	ctx := context.Background()
	// Tag values are rendered lazily: most lines are below the level.
	if s.quiet.Load() || !s.l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(tags))
	for _, t := range tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	s.l.LogAttrs(ctx, level, msg, attrs...)
}

func tagSummary(tags []tag.Tag) string {
	var b strings.Builder
	for _, t := range tags {
		fmt.Fprintf(&b, " %s=%v", t.Key(), t.Value())
	}
	return b.String()
}
