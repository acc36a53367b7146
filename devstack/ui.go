package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
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
