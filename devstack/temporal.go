package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"
)

// Temporal is a running in-process Temporal server, with its Web UI unless
// disabled. Stop it with Stop.
type Temporal struct {
	server   temporal.Server
	db       database
	ui       *uiserver.Server
	uiDone   chan struct{}
	frontend string
	// local is the frontend the server's own clients dial: the internal
	// one, without TLS, when the public one wants a client certificate;
	// apiKey is the key they present, if the server wants one (Dial).
	local     string
	apiKey    string
	uiURL     string
	namespace string
	// quiet silences the server's log once Stop begins: while its services
	// shut down one by one, the remaining ones log dozens of expected errors
	// ("Not enough hosts to serve the request", failed polls, dial errors).
	quiet *atomic.Bool

	// dcDone stops the polling of a dynamic-config file.
	dcDone chan any

	stopOnce sync.Once
	stopErr  error
}

// StartTemporal starts a Temporal server and, unless opts.UIPort is -1, its Web
// UI. It returns once the frontend answers, the namespace is registered
// (with opts.SearchAttributes when it is new; an existing DBFile is fine)
// and the UI serves. ctx bounds that wait; without a deadline it is one minute.
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

	hosts, err := resolveHosts(opts.IP, opts.BroadcastAddress)
	if err != nil {
		return nil, err
	}

	// Ports are held open until just before the server binds them, so that the
	// free ones picked here are not handed out twice, and so that a taken port
	// is reported as an error: the server itself panics or exits on it.
	serverPorts, uiPorts := newServerPorts(), reservation{}
	defer serverPorts.release()
	defer uiPorts.release()

	names := slices.Clone(temporal.DefaultServices)
	if len(opts.Services) > 0 {
		names = slices.Clone(opts.Services)
	}
	runsFrontend := slices.Contains(names, "frontend")
	frontendPort, frontendAddr := 0, opts.FrontendAddress
	if runsFrontend {
		if frontendPort, err = serverPorts.take(opts.IP, opts.Port); err != nil {
			return nil, fmt.Errorf("devstack: frontend port: %w", err)
		}
		frontendAddr = net.JoinHostPort(hosts.dial, strconv.Itoa(frontendPort))
	} else {
		opts.UIPort = -1 // the UI is the frontend's
	}
	uiPort := 0
	if opts.UIPort >= 0 {
		if uiPort, err = uiPorts.take(opts.IP, opts.UIPort); err != nil {
			return nil, fmt.Errorf("devstack: UI port: %w", err)
		}
	}
	// Every service has a config, the ones other processes run too: the
	// membership monitor tracks a ring for each configured service.
	all := slices.Clone(temporal.DefaultServices)
	if opts.internalFrontend() {
		// The server's own calls (its system workers, the operator API's
		// lookups) go through an internal frontend, which trusts them:
		// the public one wants a key or a certificate they do not have.
		// Every process knows of it; the frontend's runs it.
		all = append(all, string(primitives.InternalFrontendService))
		if runsFrontend {
			names = append(names, string(primitives.InternalFrontendService))
		}
	}
	services, err := serviceConfigs(serverPorts, opts.IP, hosts.internal, frontendPort, all)
	if err != nil {
		return nil, err
	}

	db, err := prepareDatabase(ctx, opts)
	if err != nil {
		return nil, err
	}

	cfg := serverConfig(opts, db, services, hosts.broadcast, frontendAddr)
	quiet := new(atomic.Bool)
	srvLogger := serverLogger{l: logger, quiet: quiet}
	dcDone := make(chan any)
	dc, err := dynamicConfig(opts, srvLogger, dcDone)
	if err != nil {
		db.remove()
		return nil, err
	}

	serverPorts.release()
	var srv temporal.Server
	authorizer, claimMapper := authOptions(opts.APIKey)
	err = recoverFatal(func() error {
		var err error
		srv, err = temporal.NewServer(
			temporal.WithConfig(cfg),
			temporal.ForServices(names),
			temporal.WithLogger(srvLogger),
			temporal.WithDynamicConfigClient(dc),
			// Say what auth there is rather than rely on nil meaning "off".
			temporal.WithAuthorizer(authorizer),
			temporal.WithClaimMapper(claimMapper),
		)
		return err
	})
	if err != nil {
		close(dcDone)
		db.remove()
		return nil, fmt.Errorf("devstack: create temporal server: %w", err)
	}
	if err := recoverFatal(srv.Start); err != nil {
		_ = recoverFatal(srv.Stop)
		close(dcDone)
		db.remove()
		return nil, fmt.Errorf("devstack: start temporal server: %w", err)
	}

	t := &Temporal{server: srv, db: db, frontend: frontendAddr, local: frontendAddr, apiKey: opts.APIKey, namespace: opts.Namespace, quiet: quiet, dcDone: dcDone}
	if opts.TLS != nil && runsFrontend {
		t.local = net.JoinHostPort(hosts.broadcast, strconv.Itoa(services[string(primitives.InternalFrontendService)].RPC.GRPCPort))
	}
	if !runsFrontend {
		return t, nil // the frontend's process sets the namespace up
	}
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

// Dial returns a client of the namespace as the process's own clients
// reach the server: the frontend, or with TLS the internal frontend,
// which needs none, with the API key if the server wants one. It waits
// for the frontend to answer, until ctx ends.
func (t *Temporal) Dial(ctx context.Context, logger *slog.Logger) (client.Client, error) {
	return dialFrontend(ctx, t.local, t.namespace, t.apiKey, logger)
}

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
		close(t.dcDone)
		t.db.remove()
	})
	return t.stopErr
}

func serverConfig(opts TemporalOptions, db database, services map[string]config.Service, broadcastIP, frontendAddr string) *config.Config {
	persistence := config.Persistence{
		DefaultStore:     storeName,
		VisibilityStore:  storeName,
		NumHistoryShards: int32(opts.HistoryShards),
		DataStores:       map[string]config.DataStore{storeName: {SQL: db.cfg}},
	}
	if db.visibility != nil {
		persistence.DefaultStore, persistence.VisibilityStore = "postgres", "postgres-visibility"
		persistence.DataStores = map[string]config.DataStore{"postgres": {SQL: db.cfg}, "postgres-visibility": {SQL: db.visibility}}
	}
	var serverMetrics *metrics.Config
	if opts.MetricsAddress != "" {
		serverMetrics = &metrics.Config{Prometheus: &metrics.PrometheusConfig{
			Framework: metrics.FrameworkTally, ListenAddress: opts.MetricsAddress, HandlerPath: "/metrics",
		}}
	}
	return &config.Config{
		Global: config.Global{
			// No pprof listener (port 0 is off), and metrics only when asked
			// for: a nil metrics config is a no-op handler. Fewer ports,
			// fewer collisions.
			Metrics: serverMetrics,
			TLS:     frontendTLS(opts.TLS),
			Membership: config.Membership{
				MaxJoinDuration:  30 * time.Second,
				BroadcastAddress: broadcastIP,
			},
		},
		Persistence: persistence,
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
		PublicClient: publicClient(opts, frontendAddr),
	}
}

// publicClient is how the server's system workers reach a frontend: the
// public one, or, with an API key or TLS, the internal frontend (found
// through membership, so no address).
func publicClient(opts TemporalOptions, frontendAddr string) config.PublicClient {
	if opts.internalFrontend() {
		return config.PublicClient{}
	}
	return config.PublicClient{HostPort: frontendAddr}
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

// frontendTLS is the server's TLS config: the public frontend's only;
// the services talk to each other in plain gRPC on their own addresses.
func frontendTLS(t *ServerTLS) config.RootTLS {
	if t == nil {
		return config.RootTLS{}
	}
	server := config.ServerTLS{CertFile: t.CertFile, KeyFile: t.KeyFile}
	if t.ClientCAFile != "" {
		server.ClientCAFiles, server.RequireClientAuth = []string{t.ClientCAFile}, true
	}
	return config.RootTLS{Frontend: config.GroupTLS{Server: server}}
}
