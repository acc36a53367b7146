package orders

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// saleLimits are the per-sale purchase limits of one api instance, kept in
// its memory (golang.org/x/time/rate token buckets) instead of in Redis:
// the limit guards Redis against a flood on one sale, and checking it in
// Redis cost every purchase a round trip of its own (docs/performance.md,
// "Levers"). With several api instances the sale's budget is the sum of
// theirs (docs/design.md §3.10).
type saleLimits struct {
	mu sync.Mutex
	// perSecond is the budget of one sale; 0 or less: no limit.
	perSecond int
	buckets   map[int64]*rate.Limiter
}

// maxSaleLimits bounds the buckets kept: sale ids come from requests, which
// may name sales that do not exist. Past it the buckets start over, which
// at worst lets one extra burst per sale through.
const maxSaleLimits = 4096

func newSaleLimits(perSecond int) *saleLimits {
	return &saleLimits{perSecond: perSecond, buckets: map[int64]*rate.Limiter{}}
}

// allow spends one request of the sale's budget, reporting whether there
// was one. The burst is one second's budget.
func (l *saleLimits) allow(saleID int64) bool {
	if l.perSecond <= 0 {
		return true
	}
	l.mu.Lock()
	b := l.buckets[saleID]
	if b == nil {
		if len(l.buckets) >= maxSaleLimits {
			clear(l.buckets)
		}
		b = rate.NewLimiter(rate.Limit(l.perSecond), l.perSecond)
		l.buckets[saleID] = b
	}
	l.mu.Unlock()
	return b.Allow()
}

// retryAfter is how long a refused request should wait: the time one
// request's worth of budget takes to come back.
func (l *saleLimits) retryAfter() time.Duration {
	return time.Duration(float64(time.Second) / float64(l.perSecond))
}
