package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// The read storm: the crowd refreshing the sale page while the wave of
// purchases runs (GET /v1/sales/{id} at a fixed rate), to see what the
// reads cost admission and what latency the readers get.

// ReadStorm is what the read storm measured.
type ReadStorm struct {
	TargetRate  int     `json:"target_reads_per_second"`
	Concurrency int     `json:"concurrency"`
	Reads       int     `json:"reads"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	ReadsPerSec float64 `json:"reads_per_second"`
	// Latency is from each read's send to its answer, not from when the
	// schedule wanted it sent: a storm that falls behind its rate shows in
	// ReadsPerSec below TargetRate.
	Latency Latency `json:"latency"`
	// Outcomes counts the answers: OK, HTTP_<status> or TRANSPORT.
	Outcomes map[string]int `json:"outcomes"`
}

const (
	// DefaultReadStormConcurrency is the read storm's connections (reads
	// in flight) unless Options.ReadStormConcurrency says otherwise.
	DefaultReadStormConcurrency = 64
	// maxStormSeconds bounds the storm in time (and so in count: rate
	// times this), whatever the wave does.
	maxStormSeconds = 300
)

// stormRun is a read storm under way.
type stormRun struct {
	stop func()
	done chan struct{}
	res  *ReadStorm
}

// startReadStorm fires GET /v1/sales/{saleID} at rate reads a second from
// concurrency connections of its own, until end is called or
// maxStormSeconds pass; end returns the measure.
func startReadStorm(ctx context.Context, base, saleID string, rate, concurrency int) (end func() *ReadStorm) {
	if concurrency <= 0 {
		concurrency = DefaultReadStormConcurrency
	}
	sctx, stop := context.WithTimeout(ctx, maxStormSeconds*time.Second)
	c := newTarget(base, concurrency)
	path := c.base + "/v1/sales/" + url.PathEscape(saleID)
	res := &ReadStorm{TargetRate: rate, Concurrency: concurrency, Outcomes: map[string]int{}}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		next      atomic.Int64
		wg        sync.WaitGroup
		interval  = time.Second / time.Duration(rate)
		limit     = int64(rate) * maxStormSeconds
		begin     = time.Now()
	)
	for range concurrency {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= limit {
					return
				}
				// Read i is due at begin + i/rate: a worker waits for it
				// unless the storm has fallen behind.
				if wait := time.Until(begin.Add(time.Duration(i) * interval)); wait > 0 {
					t := time.NewTimer(wait)
					select {
					case <-sctx.Done():
						t.Stop()
						return
					case <-t.C:
					}
				}
				if sctx.Err() != nil {
					return
				}
				t0 := time.Now()
				code := c.read(sctx, path)
				d := time.Since(t0)
				if sctx.Err() != nil && code == "TRANSPORT" {
					return // cut by the end of the storm: not an answer
				}
				mu.Lock()
				latencies = append(latencies, d)
				res.Outcomes[code]++
				if code != "OK" {
					res.Errors++
				}
				mu.Unlock()
			}
		})
	}
	return func() *ReadStorm {
		stop()
		wg.Wait()
		res.Seconds = time.Since(begin).Seconds()
		res.Reads = len(latencies)
		if res.Seconds > 0 {
			res.ReadsPerSec = float64(res.Reads) / res.Seconds
		}
		res.Latency = summarize(latencies)
		return res
	}
}

// read GETs url and names the answer: OK, HTTP_<status> or TRANSPORT.
// The body is read and dropped, not decoded: the storm's own CPU is spent
// on this machine's cores, beside the api's.
func (c *target) read(ctx context.Context, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "TRANSPORT"
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "TRANSPORT"
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return "TRANSPORT"
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("HTTP_%d", resp.StatusCode)
	}
	return "OK"
}

// loopbackOnly refuses a target that is not this machine: a storm is a
// load, to be aimed at one's own api.
func loopbackOnly(target string) error {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Errorf("--target %q: %w", target, err)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--read-storm-rate needs a loopback --target (127.0.0.1, ::1 or localhost), not %q: the storm is a load to aim at one's own machine", host)
}
