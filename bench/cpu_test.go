package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/seckill/seckill/internal/testenv"
)

func TestParseCPUSource(t *testing.T) {
	for _, tc := range []struct {
		flag    string
		want    CPUSource
		wantErr string
	}{
		{flag: "api=http://127.0.0.1:8080/metrics", want: CPUSource{Name: "api", Spec: "http://127.0.0.1:8080/metrics", kind: cpuMetrics, arg: "http://127.0.0.1:8080/metrics"}},
		{flag: "worker=https://w:9090/metrics", want: CPUSource{Name: "worker", Spec: "https://w:9090/metrics", kind: cpuMetrics, arg: "https://w:9090/metrics"}},
		{flag: "redis=redis", want: CPUSource{Name: "redis", Spec: "redis", kind: cpuRedis}},
		{flag: "temporal=pid:4242", want: CPUSource{Name: "temporal", Spec: "pid:4242", kind: cpuPID, arg: "4242"}},
		{flag: " pg = comm:postgres ", want: CPUSource{Name: "pg", Spec: "comm:postgres", kind: cpuComm, arg: "postgres"}},
		// A URL may itself hold '='.
		{flag: "api=http://h/metrics?x=1", want: CPUSource{Name: "api", Spec: "http://h/metrics?x=1", kind: cpuMetrics, arg: "http://h/metrics?x=1"}},
		{flag: "api", wantErr: "want NAME=SOURCE"},
		{flag: "=redis", wantErr: "want NAME=SOURCE"},
		{flag: "api=", wantErr: "want NAME=SOURCE"},
		{flag: "load_generator=redis", wantErr: "cannot name a component"},
		{flag: "my api=redis", wantErr: "cannot name a component"},
		{flag: "x=pid:0", wantErr: "pid:N"},
		{flag: "x=pid:abc", wantErr: "pid:N"},
		{flag: "x=comm:", wantErr: "comm:NAME"},
		{flag: "x=comm:a-name-of-16-chars", wantErr: "comm:NAME"},
		{flag: "x=ftp://h/metrics", wantErr: "SOURCE is"},
		{flag: "x=REDIS", wantErr: "SOURCE is"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			got, err := ParseCPUSource(tc.flag)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseCPUSource(%q) = %+v, %v; want an error with %q", tc.flag, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseCPUSource(%q) = %+v, %v; want %+v", tc.flag, got, err, tc.want)
			}
		})
	}
}

func TestParseCPUSourcesRejectsAComponentNamedTwice(t *testing.T) {
	if _, err := ParseCPUSources([]string{"api=redis", "api=pid:1"}); err == nil || !strings.Contains(err.Error(), "named twice") {
		t.Fatalf("err = %v, want named twice", err)
	}
	got, err := ParseCPUSources([]string{"api=http://a/metrics", "db=comm:postgres"})
	if err != nil || len(got) != 2 || got[0].Name != "api" || got[1].Name != "db" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestNewCPUMeterNeedsRedisForARedisSource(t *testing.T) {
	if _, err := NewCPUMeter([]CPUSource{{Name: "r", Spec: "redis", kind: cpuRedis}}, nil); err == nil {
		t.Fatal("a redis source without --redis-addr was accepted")
	}
}

func TestProcessCPUFromMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       float64
		wantErr    string
	}{
		{name: "counter", want: 12.34, text: `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.34
# TYPE seckill_purchases_total counter
seckill_purchases_total{code="ACCEPTED"} 100
`},
		{name: "untyped", want: 0.5, text: "process_cpu_seconds_total 0.5\n"},
		{name: "exponent", want: 1234.5, text: "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.2345e+03\n"},
		{name: "missing", wantErr: "no process_cpu_seconds_total", text: "# TYPE go_goroutines gauge\ngo_goroutines 42\n"},
		{name: "not an exposition", wantErr: "parse /metrics", text: "<html>502 Bad Gateway</html>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := metricValue(strings.NewReader(tc.text), "process_cpu_seconds_total")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("metricValue = %v, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("metricValue = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestRedisCPUFromInfo(t *testing.T) {
	info := func(kv ...string) map[string]map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return map[string]map[string]string{"CPU": m, "Server": {"redis_version": "7.0.15"}}
	}
	for _, tc := range []struct {
		name    string
		info    map[string]map[string]string
		want    float64
		wantErr string
	}{
		{name: "redis 7", want: 3.75, info: info("used_cpu_sys", "1.250000", "used_cpu_user", "2.500000",
			"used_cpu_sys_children", "9.000000", "used_cpu_user_children", "9.000000",
			"used_cpu_sys_main_thread", "1.000000", "used_cpu_user_main_thread", "2.000000")},
		{name: "no user time", wantErr: "no used_cpu_user", info: info("used_cpu_sys", "1.0")},
		{name: "no cpu section", wantErr: "no used_cpu_sys", info: map[string]map[string]string{"Server": {}}},
		{name: "garbage", wantErr: "used_cpu_user", info: info("used_cpu_sys", "1.0", "used_cpu_user", "n/a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := redisCPU(tc.info)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("redisCPU = %v, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("redisCPU = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// go-redis's INFO parser and redisCPU agree with a real server, and its
// counter moves with the work it does.
func TestRedisCPUFromARealServer(t *testing.T) {
	ctx := context.Background()
	rdb, _ := testenv.Redis(t)
	m := &CPUMeter{redis: rdb}
	read := func() float64 {
		v, err := m.read(ctx, CPUSource{Name: "redis", Spec: "redis", kind: cpuRedis})
		if err != nil {
			t.Fatal(err)
		}
		return v[""]
	}
	before := read()
	for i := range 2000 {
		rdb.Set(ctx, fmt.Sprint("k", i), i, 0)
	}
	if after := read(); before <= 0 || after < before {
		t.Fatalf("redis CPU %v then %v", before, after)
	}
}

// writeProc writes /proc/PID/stat under root as Linux does.
func writeProc(t *testing.T, root string, pid int, comm string, utime, stime, starttime uint64) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194560 2112 0 0 0 %d %d 0 0 20 0 1 0 %d 220000000 2500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		pid, comm, pid, pid, utime, stime, starttime)
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestProcStat(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 100, "postgres", 250, 50, 1000)
	writeProc(t, root, 101, "postgres", 10, 5, 1001)
	writeProc(t, root, 102, "redis-server", 900, 100, 1002)
	// A comm may hold spaces and parentheses: the stat's comm is what is
	// between the first '(' and the last ')'.
	writeProc(t, root, 103, "a (b) c", 7, 3, 1003)
	writeProc(t, root, os.Getpid(), "postgres", 99999, 0, 1) // the bench itself: never counted
	fs, err := procfs.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}

	if got, err := pidCPU(fs, 100); err != nil || got != 3.0 {
		t.Fatalf("pid 100: %v, %v; want 3 s (300 ticks)", got, err)
	}
	if got, err := pidCPU(fs, 103); err != nil || got != 0.1 {
		t.Fatalf("pid 103: %v, %v; want 0.1 s", got, err)
	}
	if _, err := pidCPU(fs, 999); err == nil {
		t.Fatal("a missing pid was read")
	}
	got, err := commSample(fs, "postgres")
	want := map[string]float64{"100/1000": 3.0, "101/1001": 0.15}
	if err != nil || len(got) != len(want) || got["100/1000"] != want["100/1000"] || got["101/1001"] != want["101/1001"] {
		t.Fatalf("comm:postgres = %v, %v; want %v", got, err, want)
	}
	if got, err := commSample(fs, "a (b) c"); err != nil || got["103/1003"] != 0.1 {
		t.Fatalf("comm with parentheses = %v, %v", got, err)
	}
}

// The real /proc: a child process of the test's, by pid and by name, and
// the test's own CPU.
func TestProcStatOfALiveProcess(t *testing.T) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	if _, err := pidCPU(fs, child.Process.Pid); err != nil {
		t.Fatalf("pid %d: %v", child.Process.Pid, err)
	}
	got, err := commSample(fs, "sleep")
	found := false
	for k := range got {
		found = found || strings.HasPrefix(k, fmt.Sprintf("%d/", child.Process.Pid))
	}
	if err != nil || !found {
		t.Fatalf("comm:sleep = %v, %v; want pid %d in it", got, err, child.Process.Pid)
	}
	self, err := selfCPU()
	if err != nil || self <= 0 {
		t.Fatalf("getrusage: %v, %v", self, err)
	}
}

func TestPhase(t *testing.T) {
	t0 := time.Unix(1000, 0)
	from := cpuSample{at: t0, values: map[string]map[string]float64{
		"api":         {"": 10},
		"postgres":    {"100/1": 2, "101/2": 1, "102/3": 5},
		"redis":       {"": 4},
		LoadGenerator: {"": 1},
		"restarted":   {"": 50},
	}, errs: map[string]error{"worker": fmt.Errorf("connection refused")}}
	to := cpuSample{at: t0.Add(4 * time.Second), values: map[string]map[string]float64{
		"api": {"": 13.5},
		// 100 ran 1 s; 101 exited (lost); 102's pid now belongs to a new
		// process (another start time), born within the phase: all its
		// 0.25 s count; 103 was born within the phase.
		"postgres":    {"100/1": 3, "102/9": 0.25, "103/4": 0.5},
		LoadGenerator: {"": 3},
		"worker":      {"": 7},
		"restarted":   {"": 1},
	}, errs: map[string]error{"redis": fmt.Errorf("i/o timeout")}}
	unavailable := map[string]string{}
	p := phase(from, to, unavailable)
	if p.WallSeconds != 4 {
		t.Errorf("wall %v, want 4", p.WallSeconds)
	}
	want := map[string]float64{"api": 3.5, "postgres": 1.75}
	if len(p.Components) != len(want) || p.Components["api"] != 3.5 || p.Components["postgres"] != 1.75 {
		t.Errorf("components %v, want %v", p.Components, want)
	}
	if p.SystemSeconds != 5.25 || p.LoadGeneratorSeconds != 2 {
		t.Errorf("system %v, load generator %v; want 5.25 and 2", p.SystemSeconds, p.LoadGeneratorSeconds)
	}
	for _, name := range []string{"worker", "redis", "restarted"} {
		if unavailable[name] == "" {
			t.Errorf("%s not reported unavailable: %v", name, unavailable)
		}
	}
}

// A sample reads its sources in goroutines and the load generator's own
// CPU beside them, into the same maps: under the race detector this test
// fails if the two are not serialised (a run of the bench died of
// "concurrent map writes" there).
func TestSampleReadsEverySourceAtOnce(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	srcs, err := ParseCPUSources([]string{"a=pid:" + pid, "b=pid:" + pid, "c=pid:" + pid})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewCPUMeter(srcs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for range 50 {
		s := m.sample(context.Background())
		if len(s.errs) != 0 || len(s.values) != 4 {
			t.Fatalf("sample: values %v, errors %v; want the three sources and the load generator", s.values, s.errs)
		}
	}
}
