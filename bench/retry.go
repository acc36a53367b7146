package bench

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Buyers who are told 503 and try again (Options.RetryUnavailable), as a
// failover's buyers do: each retry resends the request's own
// Idempotency-Key after the Retry-After the answer gave, and the wave
// records the window of 503 answers.

// defaultRetryAfter is the wait after a 503 that names none (a backing
// service unavailable answers without Retry-After).
const defaultRetryAfter = time.Second

// Unavailable is what a wave's 503 answers were, and what the buyers told
// 503 did about them.
type Unavailable struct {
	// Answers counts every 503 answer, first presses and retries, by its
	// problem code (HTTP_503 when the body named none).
	Answers map[string]int `json:"answers"`
	// The first and the last 503 answer, in seconds after the wave began,
	// and the span between them (all 0 when there was none).
	FirstSeconds float64 `json:"first_seconds"`
	LastSeconds  float64 `json:"last_seconds"`
	SpanSeconds  float64 `json:"span_seconds"`
	// Retries are the requests resent with the same Idempotency-Key.
	Retries int `json:"retries"`
	// GaveUp are the requests without a final answer when the wave
	// ended: their next retry would have been sent past RetryFor.
	GaveUp int `json:"gave_up"`
	// RetryForSeconds is the buyers' patience (Options.RetryFor), 0 when
	// they did not retry.
	RetryForSeconds float64 `json:"retry_for_seconds"`
	// UnitsUnsold are the units no purchase took by the wave's end: the
	// stock less the 202s and the unconfirmed purchases that held their
	// unit (Result.HeldUnconfirmed).
	UnitsUnsold int `json:"units_unsold"`
}

// note records a 503 answered at offset after the wave began.
func (u *Unavailable) note(code string, offset time.Duration) {
	s := offset.Seconds()
	if len(u.Answers) == 0 || s < u.FirstSeconds {
		u.FirstSeconds = s
	}
	u.LastSeconds = max(u.LastSeconds, s)
	u.SpanSeconds = u.LastSeconds - u.FirstSeconds
	u.Answers[code]++
}

// retryDelay is how long a buyer waits before resending: what the answer
// asked (or a second), plus up to a quarter more, so that the buyers told
// 503 at the same moment do not all come back at the same moment.
func retryDelay(asked time.Duration) time.Duration {
	if asked <= 0 {
		asked = defaultRetryAfter
	}
	return asked + rand.N(asked/4+1)
}

// queue hands a wave's buyers their next request: a retry that is due, if
// there is one, else the next first press. The wave ends when every
// request has had its final answer or given up (open reaches 0).
type queue struct {
	requests int
	next     atomic.Int64
	due      chan int // requests whose retry is due: at most one each, so never full
	open     atomic.Int64
	ended    chan struct{}
	endOnce  sync.Once
}

func newQueue(requests int) *queue {
	q := &queue{requests: requests, due: make(chan int, requests), ended: make(chan struct{})}
	q.open.Store(int64(requests))
	if requests == 0 {
		close(q.ended)
	}
	return q
}

// take returns the next request to send and whether it is a retry; ok is
// false once the wave has ended or done is closed.
func (q *queue) take(done <-chan struct{}) (i int, retry, ok bool) {
	select {
	case i := <-q.due:
		return i, true, true
	default:
	}
	if i := int(q.next.Add(1) - 1); i < q.requests {
		return i, false, true
	}
	select {
	case i := <-q.due:
		return i, true, true
	case <-q.ended:
	case <-done:
	}
	return 0, false, false
}

// retryAfter makes request i due again after d.
func (q *queue) retryAfter(i int, d time.Duration) {
	time.AfterFunc(d, func() { q.due <- i })
}

// settle marks request i as done: a final answer, or given up.
func (q *queue) settle() {
	if q.open.Add(-1) == 0 {
		q.endOnce.Do(func() { close(q.ended) })
	}
}
