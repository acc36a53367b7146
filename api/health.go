package api

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.temporal.io/sdk/client"
)

// Readiness reports each dependency.
type Readiness struct {
	Ready    bool   `json:"ready"`
	Postgres string `json:"postgres" example:"ok"`
	Redis    string `json:"redis" example:"ok"`
	Temporal string `json:"temporal" example:"ok"`
}

func (s *Server) registerHealth() {
	huma.Register(s.api, huma.Operation{
		OperationID: "healthz", Method: http.MethodGet, Path: "/healthz",
		Summary: "Liveness: the process is up", Tags: []string{"health"},
	}, func(ctx context.Context, _ *struct{}) (*struct {
		Body struct {
			Status string `json:"status"`
		}
	}, error) {
		out := &struct {
			Body struct {
				Status string `json:"status"`
			}
		}{}
		out.Body.Status = "ok"
		return out, nil
	})

	huma.Register(s.api, huma.Operation{
		OperationID: "readyz", Method: http.MethodGet, Path: "/readyz",
		Summary: "Readiness: Postgres, Redis and Temporal reachable", Tags: []string{"health"},
		Description: "200 when all three answer, 503 otherwise; the body says which one is down.",
		Responses:   map[string]*huma.Response{"503": {Description: "A dependency is down."}},
	}, func(ctx context.Context, _ *struct{}) (*struct {
		Status int
		Body   Readiness
	}, error) {
		r := s.readiness(ctx)
		status := http.StatusOK
		if !r.Ready {
			status = http.StatusServiceUnavailable
		}
		return &struct {
			Status int
			Body   Readiness
		}{status, r}, nil
	})
}

// readiness checks the three dependencies in parallel, each within 2s.
func (s *Server) readiness(ctx context.Context) Readiness {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	check := func(err error) string {
		if err != nil {
			return "down"
		}
		return "ok"
	}
	var r Readiness
	var wg sync.WaitGroup
	wg.Go(func() { r.Postgres = check(s.deps.Store.Ping(ctx)) })
	wg.Go(func() { r.Redis = check(s.deps.Stock.Client().Ping(ctx).Err()) })
	wg.Go(func() {
		_, err := s.deps.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
		r.Temporal = check(err)
	})
	wg.Wait()
	r.Ready = r.Postgres == "ok" && r.Redis == "ok" && r.Temporal == "ok"
	return r
}

// Info tells clients how this deployment is set up.
type Info struct {
	TemporalUIURL     string `json:"temporal_ui_url" doc:"Base URL of the Temporal Web UI; empty if not configured."`
	TemporalNamespace string `json:"temporal_namespace"`
	DevMode           bool   `json:"dev_mode" doc:"Whether POST /v1/dev/token is available."`
}

func (s *Server) registerInfo() {
	huma.Register(s.api, huma.Operation{
		OperationID: "info", Method: http.MethodGet, Path: "/v1/info",
		Summary: "Deployment facts for clients (Temporal Web UI link, dev mode)", Tags: []string{"health"},
	}, func(ctx context.Context, _ *struct{}) (*struct{ Body Info }, error) {
		ns := s.cfg.TemporalNamespace
		if ns == "" {
			ns = "default"
		}
		return &struct{ Body Info }{Info{TemporalUIURL: s.cfg.TemporalUIURL, TemporalNamespace: ns, DevMode: s.cfg.DevTokens}}, nil
	})
}
