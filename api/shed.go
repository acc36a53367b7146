package api

import (
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/api/wire"
)

// shedAbove marks an operation whose calls beyond Config.MaxInFlight at
// once are refused.
const shedAbove = "shed-above-max-in-flight"

// overloaded is the answer to a shed call.
func overloaded() *wire.Problem {
	return problem(http.StatusServiceUnavailable, wire.CodeUnavailable, "overloaded; retry in a second")
}

// shed answers calls beyond MaxInFlight with a 503 and Retry-After at once,
// before the token check or any parsing, so an overload costs the api as
// little as possible and the latency of everything else (/healthz, the
// purchases let in) stays bounded instead of queueing without bound.
func (s *Server) shed(ctx huma.Context, next func(huma.Context)) {
	if ctx.Operation().Metadata[shedAbove] != true {
		next(ctx)
		return
	}
	select {
	case s.inFlight <- struct{}{}:
	default:
		p := overloaded()
		s.metrics.observePurchase(p, 0)
		ctx.SetHeader("Retry-After", "1")
		_ = huma.WriteErr(s.api, ctx, p.Status, p.Detail)
		return
	}
	defer func() { <-s.inFlight }()
	s.lastPurchase.Store(time.Now().UnixNano())
	next(ctx)
}
