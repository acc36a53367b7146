package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/config"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/seckill/seckill/internal/temporalconf"
)

// createNamespace writes the namespace, with its retention and search
// attributes, straight into the database before the server starts, unless
// it exists. Registering the search attributes here rather than through
// the operator service means every service knows them from the first
// second, with no wait for namespace caches to refresh.
func createNamespace(sqlCfg *config.SQL, opts TemporalOptions) error {
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, opts.Namespace, false, opts.SearchAttributes)
	if err != nil {
		return fmt.Errorf("devstack: namespace %q: %w", opts.Namespace, err)
	}
	ns.Detail.Config.Retention = durationpb.New(opts.Retention)
	if err := sqliteschema.CreateNamespaces(sqlCfg, ns); err != nil {
		return fmt.Errorf("devstack: create namespace %q: %w", opts.Namespace, err)
	}
	return nil
}

// configure waits for the frontend, then makes the namespace's retention
// match opts, which matters for an existing DBFile. Search attributes are
// not checked here: an existing namespace that lacks some is the caller's
// to fix (worker.RegisterSearchAttributes, which seckill runs at start).
func (t *Temporal) configure(ctx context.Context, opts TemporalOptions, logger *slog.Logger) error {
	c, err := t.Dial(ctx, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	return ensureRetention(ctx, c, t.namespace, opts.Retention)
}

func dialFrontend(ctx context.Context, addr, namespace, apiKey string, logger *slog.Logger) (client.Client, error) {
	opts := client.Options{HostPort: addr, Namespace: namespace, Logger: sdklog.NewStructuredLogger(logger)}
	// A plain local frontend, with the key if the server wants one.
	if err := (temporalconf.Settings{TLS: "off", APIKey: apiKey}).Apply(&opts); err != nil {
		return nil, err
	}
	for {
		c, err := client.DialContext(ctx, opts)
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
	var missing *serviceerror.NamespaceNotFound
	if errors.As(err, &missing) {
		// A Postgres store is new: the namespace was not written before
		// the server started (prepareDatabase), so it is registered here.
		resp, err = registerNamespace(ctx, c, namespace, retention)
	}
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

// registerNamespace registers the namespace and waits until the frontend
// knows it (its namespace cache refreshes every few seconds).
func registerNamespace(ctx context.Context, c client.Client, namespace string, retention time.Duration) (*workflowservice.DescribeNamespaceResponse, error) {
	_, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: namespace, WorkflowExecutionRetentionPeriod: durationpb.New(retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return nil, fmt.Errorf("devstack: register namespace %q: %w", namespace, err)
	}
	for {
		// DescribeNamespace reads the database; the other services (the
		// operator API among them) know the namespace once their
		// namespace caches refresh, which this second call waits for.
		resp, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		if err == nil {
			_, err = c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
		}
		if err == nil {
			return resp, nil
		}
		if werr := sleepCtx(ctx, pollInterval); werr != nil {
			return nil, fmt.Errorf("devstack: namespace %q registered but not known yet: %w", namespace, err)
		}
	}
}
