package api

import (
	"context"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.temporal.io/sdk/client"
)

// Readiness reports each dependency.
type Readiness struct {
	Ready bool `json:"ready" doc:"Whether all three answer."`
	// Database is which database the api stores orders in: the field
	// below is named for Postgres, and answers for SQLite on seckill dev.
	Database string `json:"database" enum:"postgres,sqlite" example:"postgres" doc:"The database the orders are stored in: postgres, or sqlite (seckill dev's embedded one), whose state the postgres field then gives."`
	Postgres string `json:"postgres" enum:"ok,down" example:"ok" doc:"Whether the database answers (named for Postgres; with database sqlite, it is SQLite's)."`
	Redis    string `json:"redis" enum:"ok,down" example:"ok"`
	Temporal string `json:"temporal" enum:"ok,down" example:"ok"`
}

// Liveness is the answer of /healthz. (Named so, not after the operation:
// generators name their wrapper of an operation's answers
// <OperationId>Response, HealthzResponse here.)
type Liveness struct {
	Status string `json:"status" enum:"ok" example:"ok"`
}

func (s *Server) registerHealth() {
	huma.Register(s.api, huma.Operation{
		OperationID: "healthz", Method: http.MethodGet, Path: "/healthz",
		Summary: "Liveness: the process is up", Tags: []string{"health"},
		Security: public, Responses: s.problems(),
	}, func(ctx context.Context, _ *struct{}) (*struct{ Body Liveness }, error) {
		return &struct{ Body Liveness }{Liveness{Status: "ok"}}, nil
	})

	readiness := s.api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[Readiness](), true, "Readiness")
	readyz := s.problems()
	readyz["503"] = &huma.Response{
		Description: "A dependency is down: the body says which.",
		Content:     map[string]*huma.MediaType{"application/json": {Schema: readiness}},
	}
	huma.Register(s.api, huma.Operation{
		OperationID: "readyz", Method: http.MethodGet, Path: "/readyz",
		Summary: "Readiness: Postgres, Redis and Temporal reachable", Tags: []string{"health"},
		Description: "200 when all three answer, 503 otherwise; the body says which one is down.",
		Security:    public, Responses: readyz,
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
	r := Readiness{Database: s.deps.Store.Kind()}
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
	TemporalUIURL     string `json:"temporal_ui_url" doc:"Base URL of the Temporal Web UI, where an order's workflow can be looked at; empty if the deployment has none."`
	TemporalNamespace string `json:"temporal_namespace" doc:"The Temporal namespace of the orders' workflows."`
	DevMode           bool   `json:"dev_mode" doc:"Whether POST /v1/dev/token is available (dev mode only)."`
}

func (s *Server) registerInfo() {
	huma.Register(s.api, huma.Operation{
		OperationID: "info", Method: http.MethodGet, Path: "/v1/info",
		Summary: "Deployment facts for clients (Temporal Web UI link, dev mode)", Tags: []string{"health"},
		Security: public, Responses: s.problems(),
	}, func(ctx context.Context, _ *struct{}) (*struct{ Body Info }, error) {
		ns := s.cfg.TemporalNamespace
		if ns == "" {
			ns = "default"
		}
		return &struct{ Body Info }{Info{TemporalUIURL: s.cfg.TemporalUIURL, TemporalNamespace: ns, DevMode: s.cfg.DevTokens}}, nil
	})
}
