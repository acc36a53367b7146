package e2e

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// Far more purchase requests than the api admits at once: it sheds the
// excess with fast 503s instead of queueing, /healthz keeps answering, and
// memory stays flat. Latencies are logged (they are measurements, not
// assertions: this machine is shared).
func TestOverloadIsShedAndHealthzAnswers(t *testing.T) {
	testenv.RedisAddr(t)
	port := testenv.FreePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	dev := run(t, "dev", []string{"SECKILL_JWT_SECRET=" + secret, "SECKILL_LOG_LEVEL=warn"}, "dev", "--memory", "--seed-stock=0",
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--temporal-port=0", "--ui-port=-1",
		"--max-in-flight=16", "--user-rate=0")
	waitReady(t, api+"/readyz", 60*time.Second)
	admin, _ := tokens(t)
	sale := openSale(t, api, admin, 1_000_000)
	rssBefore := rss(t, dev.Pid())

	const clients, perClient = 256, 40
	var shed, accepted, other atomic.Int64
	stop := make(chan struct{})
	var healthz []time.Duration
	var hwg sync.WaitGroup
	hwg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			resp, err := http.Get(api + "/healthz")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("/healthz during the overload: %v %v", resp, err)
				return
			}
			resp.Body.Close()
			healthz = append(healthz, time.Since(t0))
			time.Sleep(20 * time.Millisecond) // sampling interval
		}
	})
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				tok := mint(t, fmt.Sprintf("o-%d-%d", c, i))
				req, _ := http.NewRequest("POST", api+"/v1/sales/"+sale+"/orders", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := cl.Do(req)
				if err != nil {
					other.Add(1)
					continue
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusAccepted:
					accepted.Add(1)
				case http.StatusServiceUnavailable:
					shed.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	hwg.Wait()
	rssAfter := rss(t, dev.Pid())
	slices.Sort(healthz)
	p := func(q float64) time.Duration { return healthz[int(q*float64(len(healthz)-1))] }
	t.Logf("%d requests from %d clients: %d accepted, %d shed (503), %d other; /healthz over %d samples p50 %s p99 %s max %s; RSS %d → %d MiB",
		clients*perClient, clients, accepted.Load(), shed.Load(), other.Load(), len(healthz), p(0.5), p(0.99), p(1), rssBefore>>10, rssAfter>>10)
	if shed.Load() == 0 {
		t.Fatal("nothing was shed")
	}
	if other.Load() != 0 {
		t.Fatalf("%d requests failed otherwise (timeouts, errors)", other.Load())
	}
}

var mintSigner = sync.OnceValue(func() func(string) string {
	s, _ := newSigner()
	return func(user string) string { tok, _ := s.Mint(user, "buyer", time.Hour); return tok }
})

func mint(t *testing.T, user string) string { return mintSigner()(user) }

// rss is a process's resident set in KiB.
func rss(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kib int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kib)
			return kib
		}
	}
	return 0
}
