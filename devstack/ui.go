package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/labstack/echo/v4"
	uiserver "github.com/temporalio/ui-server/v2/server"
	uiapi "github.com/temporalio/ui-server/v2/server/api"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
	"google.golang.org/grpc/metadata"
)

func (t *Temporal) startUI(ctx context.Context, ports *reservation, opts TemporalOptions, hosts hostSet, port int, logger *slog.Logger) error {
	cfg := &uiconfig.Config{
		TemporalGRPCAddress: t.local,
		Host:                opts.IP,
		Port:                port,
		EnableUI:            true,
		DefaultNamespace:    t.namespace,
		// Plain HTTP on a dev box: the CSRF cookie must not require HTTPS.
		CORS:     uiconfig.CORS{CookieInsecure: true},
		HideLogs: true,
		// Offline-friendly: no fetching of news from temporal.io.
		DisableNewsFetch: true,
		// The server refuses non-query POSTs itself then, whatever the
		// page shows.
		DisableWriteActions: opts.UIReadOnly,
	}
	uiOpts := []uioptions.ServerOption{uioptions.WithConfigProvider(cfg)}
	if t.apiKey != "" {
		uiOpts = append(uiOpts, uioptions.WithAPIMiddleware([]uiapi.Middleware{presentKey(t.apiKey)}))
	}
	var ui *uiserver.Server
	if err := recoverFatal(func() error {
		ui = uiserver.NewServer(uiOpts...)
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

// presentKey makes the UI present the server's API key on every call it
// makes for its pages, in place of whatever Authorization the browser
// sent: the UI is the server's own, and whoever may reach it (loopback in
// dev, the edge's sign-in in docker-compose.yml) may use it. The browser's
// header is dropped rather than passed on beside the key, so that what the
// frontend authorizes is the key alone.
func presentKey(key string) uiapi.Middleware {
	md := metadata.Pairs("authorization", "Bearer "+key)
	return func(c echo.Context) runtime.ServeMuxOption {
		c.Request().Header.Del(echo.HeaderAuthorization)
		return runtime.WithMetadata(func(context.Context, *http.Request) metadata.MD { return md })
	}
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
