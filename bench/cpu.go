package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
	"github.com/redis/go-redis/v9"
)

// A CPUSource says where one component's cumulative CPU time is read:
//
//	http(s)://…/metrics  process_cpu_seconds_total of a Prometheus exposition
//	redis                used_cpu_sys + used_cpu_user of INFO cpu on --redis-addr
//	pid:N                utime + stime of /proc/N/stat
//	comm:NAME            the same, summed over the live local processes whose
//	                     /proc/*/comm is NAME (the bench's own process excluded)
//
// A comm source sees only processes alive at both ends of a phase: the CPU
// of one that exits within it is lost (Postgres backends live as long as
// the system's connection pool keeps them).
type CPUSource struct {
	Name string // the component, e.g. "api"
	Spec string // the source as given, e.g. "comm:postgres"
	kind cpuKind
	arg  string // the URL, the pid or the comm name
}

type cpuKind int

const (
	cpuMetrics cpuKind = iota
	cpuRedis
	cpuPID
	cpuComm
)

// LoadGenerator is the component name of the bench's own CPU, which is
// reported beside the system's, never in its total.
const LoadGenerator = "load_generator"

// maxComm is the longest comm Linux keeps (TASK_COMM_LEN - 1); a longer
// name never matches.
const maxComm = 15

// ParseCPUSource parses NAME=SOURCE, the --cpu flag.
func ParseCPUSource(s string) (CPUSource, error) {
	name, spec, ok := strings.Cut(s, "=")
	name, spec = strings.TrimSpace(name), strings.TrimSpace(spec)
	if !ok || name == "" || spec == "" {
		return CPUSource{}, fmt.Errorf("--cpu %q: want NAME=SOURCE", s)
	}
	if name == LoadGenerator || strings.ContainsAny(name, " \t") {
		return CPUSource{}, fmt.Errorf("--cpu %q: %q cannot name a component", s, name)
	}
	src := CPUSource{Name: name, Spec: spec}
	switch {
	case strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://"):
		src.kind, src.arg = cpuMetrics, spec
	case spec == "redis":
		src.kind = cpuRedis
	case strings.HasPrefix(spec, "pid:"):
		pid, err := strconv.Atoi(strings.TrimPrefix(spec, "pid:"))
		if err != nil || pid <= 0 {
			return CPUSource{}, fmt.Errorf("--cpu %q: pid:N wants a process id", s)
		}
		src.kind, src.arg = cpuPID, strconv.Itoa(pid)
	case strings.HasPrefix(spec, "comm:"):
		comm := strings.TrimPrefix(spec, "comm:")
		if comm == "" || len(comm) > maxComm {
			return CPUSource{}, fmt.Errorf("--cpu %q: comm:NAME wants a process name of 1 to %d characters (what /proc/PID/comm holds)", s, maxComm)
		}
		src.kind, src.arg = cpuComm, comm
	default:
		return CPUSource{}, fmt.Errorf("--cpu %q: SOURCE is an http(s) /metrics URL, redis, pid:N or comm:NAME", s)
	}
	return src, nil
}

// ParseCPUSources parses the --cpu flags; a component named twice is an
// error.
func ParseCPUSources(flags []string) ([]CPUSource, error) {
	var out []CPUSource
	for _, f := range flags {
		src, err := ParseCPUSource(f)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(o CPUSource) bool { return o.Name == src.Name }) {
			return nil, fmt.Errorf("--cpu: component %q named twice", src.Name)
		}
		out = append(out, src)
	}
	return out, nil
}

// DefaultCPUSources are the sources used when no --cpu is given: the api's
// /metrics (its internal listener's, if known), Redis when its address is
// known, and the local postgres processes if there are any.
//
// database is the target's, as its /readyz names it (TargetDatabase):
// "sqlite" leaves Postgres out, which would otherwise count a Postgres
// that runs here but serves something else.
func DefaultCPUSources(apiMetrics string, withRedis bool, database string) []CPUSource {
	var out []CPUSource
	if apiMetrics != "" {
		out = append(out, CPUSource{Name: "api", Spec: apiMetrics, kind: cpuMetrics, arg: apiMetrics})
	}
	if withRedis {
		out = append(out, CPUSource{Name: "redis", Spec: "redis", kind: cpuRedis})
	}
	if fs, err := procfs.NewDefaultFS(); err == nil && database != "sqlite" {
		if s, err := commSample(fs, "postgres"); err == nil && len(s) > 0 {
			out = append(out, CPUSource{Name: "postgres", Spec: "comm:postgres", kind: cpuComm, arg: "postgres"})
		}
	}
	return out
}

// CPUMeter samples the cumulative CPU time of the system's components and
// of the bench itself.
type CPUMeter struct {
	sources []CPUSource
	http    *http.Client
	redis   *redis.Client // nil without a redis source
	proc    procfs.FS
	procErr error
}

// NewCPUMeter returns a meter of sources; redisOpts is the system's Redis,
// required by a redis source. Close it after use.
func NewCPUMeter(sources []CPUSource, redisOpts *redis.Options) (*CPUMeter, error) {
	m := &CPUMeter{sources: sources, http: &http.Client{Timeout: 10 * time.Second}}
	m.proc, m.procErr = procfs.NewDefaultFS()
	for _, s := range sources {
		if s.kind != cpuRedis || m.redis != nil {
			continue
		}
		if redisOpts == nil {
			return nil, fmt.Errorf("--cpu %s=redis needs --redis-addr", s.Name)
		}
		o := *redisOpts
		o.PoolSize = 2
		m.redis = redis.NewClient(&o)
	}
	return m, nil
}

// Close releases the meter's connections.
func (m *CPUMeter) Close() {
	if m.redis != nil {
		m.redis.Close()
	}
}

// Sources maps each component to its source as given.
func (m *CPUMeter) Sources() map[string]string {
	out := map[string]string{LoadGenerator: "getrusage(self)"}
	for _, s := range m.sources {
		out[s.Name] = s.Spec
	}
	return out
}

// cpuSample is one reading of every component: per component, the CPU
// seconds of each process it counts, keyed so that a process is matched
// with itself across readings (a comm source's pid/starttime; "" for a
// source that reads one number).
type cpuSample struct {
	at     time.Time
	values map[string]map[string]float64
	errs   map[string]error
}

// sample reads every source at once, so that the readings are as close
// to the boundary as the slowest source allows.
func (m *CPUMeter) sample(ctx context.Context) cpuSample {
	s := cpuSample{at: time.Now(), values: map[string]map[string]float64{}, errs: map[string]error{}}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, src := range m.sources {
		wg.Go(func() {
			v, err := m.read(ctx, src)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.errs[src.Name] = err
				return
			}
			s.values[src.Name] = v
		})
	}
	self, err := selfCPU()
	mu.Lock() // the sources' goroutines write the same maps
	if err == nil {
		s.values[LoadGenerator] = map[string]float64{"": self}
	} else {
		s.errs[LoadGenerator] = err
	}
	mu.Unlock()
	wg.Wait()
	return s
}

func (m *CPUMeter) read(ctx context.Context, src CPUSource) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	one := func(v float64, err error) (map[string]float64, error) {
		if err != nil {
			return nil, err
		}
		return map[string]float64{"": v}, nil
	}
	switch src.kind {
	case cpuMetrics:
		return one(m.metricsCPU(ctx, src.arg))
	case cpuRedis:
		info, err := m.redis.InfoMap(ctx, "cpu").Result()
		if err != nil {
			return nil, err
		}
		return one(redisCPU(info))
	case cpuPID:
		if m.procErr != nil {
			return nil, m.procErr
		}
		pid, _ := strconv.Atoi(src.arg)
		return one(pidCPU(m.proc, pid))
	case cpuComm:
		if m.procErr != nil {
			return nil, m.procErr
		}
		return commSample(m.proc, src.arg)
	}
	return nil, fmt.Errorf("unknown source %q", src.Spec)
}

func (m *CPUMeter) metricsCPU(ctx context.Context, url string) (float64, error) {
	return scrape(ctx, m.http, url, "process_cpu_seconds_total")
}

// scrape reads the value of the one unlabelled series name (a process
// collector's, e.g. process_cpu_seconds_total) from the Prometheus /metrics
// at url.
func scrape(ctx context.Context, hc *http.Client, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	// The plain text format: expfmt's text parser reads it.
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	v, err := metricValue(resp.Body, name)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", url, err)
	}
	return v, nil
}

// metricValue reads the value of the series name from a Prometheus text
// exposition: the first of its series, which for a process collector's
// metric is the only one.
func metricValue(r io.Reader, name string) (float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return 0, fmt.Errorf("parse /metrics: %w", err)
	}
	fam, ok := fams[name]
	if !ok || len(fam.GetMetric()) == 0 {
		return 0, fmt.Errorf("no %s in /metrics", name)
	}
	// A counter, a gauge and an untyped sample are all read.
	m := fam.GetMetric()[0]
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), nil
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), nil
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), nil
	}
	return 0, fmt.Errorf("%s has no value", name)
}

// redisCPU is the Redis server's own CPU (every thread of its process) from
// INFO cpu. The *_children figures are forks for persistence, not serving.
func redisCPU(info map[string]map[string]string) (float64, error) {
	cpu := info["CPU"]
	var total float64
	for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, ok := cpu[k]
		if !ok {
			return 0, fmt.Errorf("INFO cpu has no %s", k)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s=%q: %w", k, v, err)
		}
		total += f
	}
	return total, nil
}

func pidCPU(fs procfs.FS, pid int) (float64, error) {
	p, err := fs.Proc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return st.CPUTime(), nil
}

// commSample reads the CPU of every live process named comm, but the
// bench's own, keyed by pid and start time so that a reused pid is not
// taken for the process that had it before.
func commSample(fs procfs.FS, comm string) (map[string]float64, error) {
	procs, err := fs.AllProcs()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	out := map[string]float64{}
	for _, p := range procs {
		if p.PID == self {
			continue
		}
		st, err := p.Stat()
		if err != nil || st.Comm != comm {
			continue // gone since the listing, or another program
		}
		out[fmt.Sprintf("%d/%d", p.PID, st.Starttime)] = st.CPUTime()
	}
	return out, nil
}

// selfCPU is the bench's own CPU time, every thread, from getrusage.
func selfCPU() (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime), nil
}

// CPUPhase is the CPU time spent in one phase of the run.
type CPUPhase struct {
	WallSeconds float64 `json:"wall_seconds"`
	// Components are the CPU seconds of each system component in the
	// phase; SystemSeconds is their sum.
	Components    map[string]float64 `json:"components"`
	SystemSeconds float64            `json:"system_seconds"`
	// LoadGeneratorSeconds is the bench's own CPU in the phase, not part of
	// the system's.
	LoadGeneratorSeconds float64 `json:"load_generator_seconds"`
}

// CPU is what the run cost in CPU time, per phase: the engine probe
// (when the ceiling is measured), admission from just before the first
// purchase to the end of the wave, the saga from there to every order
// created.
type CPU struct {
	Sources map[string]string `json:"sources"`
	// Engine is the engine ceiling's probe, before the sale.
	Engine    *CPUPhase `json:"engine,omitempty"`
	Admission *CPUPhase `json:"admission,omitempty"`
	Saga      *CPUPhase `json:"saga,omitempty"`
	// System CPU per no-op workflow of the probe, per request of the
	// wave, and per accepted order in the saga (only when every order was
	// created).
	EngineMsPerWorkflow   float64 `json:"engine_ms_per_workflow,omitempty"`
	AdmissionMsPerRequest float64 `json:"admission_ms_per_request,omitempty"`
	SagaMsPerOrder        float64 `json:"saga_ms_per_order,omitempty"`
	// The bench's own CPU per request of the wave.
	LoadGeneratorMsPerRequest float64 `json:"load_generator_ms_per_request,omitempty"`
	// Unavailable names the components left out of a phase, and why: a
	// source that could not be read at one of its ends.
	Unavailable map[string]string `json:"unavailable,omitempty"`
}

// phase is the CPU spent between two samples. A component missing from
// either is left out and recorded in unavailable; a comm source counts
// the processes alive at both ends and those born within (all their CPU).
func phase(from, to cpuSample, unavailable map[string]string) *CPUPhase {
	p := &CPUPhase{WallSeconds: to.at.Sub(from.at).Seconds(), Components: map[string]float64{}}
	for name, err := range from.errs {
		unavailable[name] = err.Error()
	}
	for name, err := range to.errs {
		unavailable[name] = err.Error()
	}
	for name, end := range to.values {
		start, ok := from.values[name]
		if !ok {
			continue
		}
		var d float64
		for proc, v := range end {
			d += v - start[proc]
		}
		if d < 0 {
			// A counter that went back: the process restarted in between.
			unavailable[name] = fmt.Sprintf("its CPU counter went back by %.3f s (restarted?)", -d)
			continue
		}
		if name == LoadGenerator {
			p.LoadGeneratorSeconds = d
			continue
		}
		p.Components[name] = d
		p.SystemSeconds += d
	}
	return p
}
