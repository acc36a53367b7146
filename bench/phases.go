package bench

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	_ "github.com/lib/pq" // the Postgres databases of --pg
)

// The phases of an order's life, each measured on its own: place (from
// the wave to every order at AWAITING_PAYMENT), pay, cancel and expire.
// Each runs after the one before has settled, so that what the system
// spends in it is what that step costs.

// Phase names, in the order they run.
const (
	PhasePlace  = "place"
	PhasePay    = "pay"
	PhaseCancel = "cancel"
	PhaseExpire = "expire"
)

// OrderPhase is one phase's figures.
type OrderPhase struct {
	Name   string `json:"name"`
	Orders int    `json:"orders"` // orders the phase moved
	// Complete: every order of the phase reached its end before the
	// deadline (the per-order figures are left out otherwise).
	Complete        bool    `json:"complete"`
	Seconds         float64 `json:"seconds"`
	OrdersPerSecond float64 `json:"orders_per_second"`
	// Latency of the buyers' requests (pay and cancel): at a payment
	// provider, the pay's answer with the payment to complete there.
	Latency *Latency `json:"latency,omitempty"`
	// Payment is the pay phase's steps at a payment provider; nil where
	// the pay itself made the order PAID.
	Payment    *PhasePayment `json:"payment,omitempty"`
	LoadBefore string        `json:"load_average_before"`
	LoadAfter  string        `json:"load_average_after"`
	// CPU is what each component spent in the phase; CPUMsPerOrder the
	// same per order, by component and "system" (their sum).
	CPU           *CPUPhase          `json:"cpu,omitempty"`
	CPUMsPerOrder map[string]float64 `json:"cpu_ms_per_order,omitempty"`
	// Postgres has the commits and WAL of each --pg database.
	Postgres map[string]PGPhase `json:"postgres,omitempty"`
	// Note says what to keep in mind reading the phase (e.g. an expiry
	// that began before the phase before it had ended).
	Note string `json:"note,omitempty"`
}

// PhasePayment is a pay phase at a payment provider: the buyers' steps on
// its hosted page, and how long each capture took to make its order PAID.
type PhasePayment struct {
	Provider string `json:"provider"`
	// Page is the GET of the hosted page; Submit the POST of its Pay form,
	// up to the provider's redirect back to the shop (the capture done).
	Page   Latency `json:"page_latency"`
	Submit Latency `json:"submit_latency"`
	// CaptureToPaid runs from the Pay form's answer, on the bench's clock,
	// to the order's paid_at, on the clock of the worker that recorded it:
	// the provider's notification, the api's signal, the order's workflow
	// and its row. Orders read PAID after the phase only.
	CaptureToPaid *Latency `json:"capture_to_paid,omitempty"`
	// Paid is the orders read PAID after the phase, with their paid_at.
	Paid int `json:"paid"`
	// Failed counts the orders not paid, by the step that failed: pay (the
	// api refused the pay), page, submit, or paid (submitted, not PAID
	// after the phase); FailedSample is the first failure's error.
	Failed       map[string]int `json:"failed,omitempty"`
	FailedSample string         `json:"failed_sample,omitempty"`
	skewed       int            // orders whose paid_at came before their capture's answer
}

// PGPhase is what one Postgres database wrote in a phase: its commits
// (pg_stat_database.xact_commit, which backends publish up to a second
// late, and idle ones up to 10 s late) and the WAL of its whole cluster
// (pg_current_wal_lsn), so databases of one cluster show the same WAL.
type PGPhase struct {
	Commits          int64   `json:"commits"`
	WALBytes         int64   `json:"wal_bytes"`
	CommitsPerOrder  float64 `json:"commits_per_order,omitempty"`
	WALBytesPerOrder float64 `json:"wal_bytes_per_order,omitempty"`
	// Cluster is the cluster's system identifier: equal for databases
	// that share a WAL.
	Cluster string `json:"cluster"`
}

// A PGSource is a database whose commits and WAL the phases report.
type PGSource struct {
	Name string
	URL  string
}

// ParsePGSources parses the --pg flags, NAME=URL.
func ParsePGSources(flags []string) ([]PGSource, error) {
	var out []PGSource
	for _, f := range flags {
		name, url, ok := strings.Cut(f, "=")
		name, url = strings.TrimSpace(name), strings.TrimSpace(url)
		if !ok || name == "" || !strings.HasPrefix(url, "postgres") {
			// The URL holds a password: never echo it.
			return nil, fmt.Errorf("--pg %q…: want NAME=postgres://…", name)
		}
		if slices.ContainsFunc(out, func(s PGSource) bool { return s.Name == name }) {
			return nil, fmt.Errorf("--pg: database %q named twice", name)
		}
		out = append(out, PGSource{Name: name, URL: url})
	}
	return out, nil
}

// PGMeter reads the commits and WAL position of Postgres databases.
type PGMeter struct {
	dbs map[string]*sql.DB
}

// NewPGMeter opens (lazily) the databases of sources. Close it after use.
func NewPGMeter(sources []PGSource) (*PGMeter, error) {
	m := &PGMeter{dbs: map[string]*sql.DB{}}
	for _, s := range sources {
		db, err := sql.Open("postgres", s.URL)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("--pg %s: %w", s.Name, err)
		}
		db.SetMaxOpenConns(1)
		m.dbs[s.Name] = db
	}
	return m, nil
}

// Close closes the meter's connections.
func (m *PGMeter) Close() {
	for _, db := range m.dbs {
		db.Close()
	}
}

// pgReading is one database's counters at one moment.
type pgReading struct {
	commits int64
	lsn     int64 // bytes since the start of the WAL
	cluster string
}

// sample reads every database; one that cannot be read is left out.
func (m *PGMeter) sample(ctx context.Context) map[string]pgReading {
	out := map[string]pgReading{}
	for name, db := range m.dbs {
		var r pgReading
		// pg_stat_clear_snapshot: a fresh read of the counters, not the
		// transaction's cached snapshot.
		err := db.QueryRowContext(ctx, `SELECT pg_stat_clear_snapshot() IS NULL,
			(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
			pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
			(SELECT system_identifier::text FROM pg_control_system())`).Scan(new(bool), &r.commits, &r.lsn, &r.cluster)
		if err == nil {
			out[name] = r
		}
	}
	return out
}

// probe is one reading at a phase boundary.
type probe struct {
	at   time.Time
	load string
	cpu  *cpuSample
	pg   map[string]pgReading
}

func (o Options) probe(ctx context.Context) probe {
	p := probe{at: time.Now(), load: loadAverage()}
	if o.CPU != nil {
		s := o.CPU.sample(ctx)
		p.cpu = &s
	}
	if o.PG != nil {
		p.pg = o.PG.sample(ctx)
	}
	return p
}

// newPhase builds a phase's figures from its boundaries; lat are the
// buyers' request times, if the phase sends requests.
func newPhase(name string, orders int, complete bool, from, to probe, lat []time.Duration, unavailable map[string]string) OrderPhase {
	ph := OrderPhase{Name: name, Orders: orders, Complete: complete, Seconds: to.at.Sub(from.at).Seconds(),
		LoadBefore: from.load, LoadAfter: to.load}
	per := func(v float64) float64 {
		if !complete || orders <= 0 {
			return 0
		}
		return v / float64(orders)
	}
	if ph.Seconds > 0 && complete {
		ph.OrdersPerSecond = float64(orders) / ph.Seconds
	}
	if len(lat) > 0 {
		l := summarize(lat)
		ph.Latency = &l
	}
	if from.cpu != nil && to.cpu != nil {
		ph.CPU = phase(*from.cpu, *to.cpu, unavailable)
		if complete && orders > 0 {
			ph.CPUMsPerOrder = map[string]float64{"system": 1000 * per(ph.CPU.SystemSeconds)}
			for c, v := range ph.CPU.Components {
				ph.CPUMsPerOrder[c] = 1000 * per(v)
			}
		}
	}
	for name, end := range to.pg {
		start, ok := from.pg[name]
		if !ok {
			continue
		}
		if ph.Postgres == nil {
			ph.Postgres = map[string]PGPhase{}
		}
		pg := PGPhase{Commits: end.commits - start.commits, WALBytes: end.lsn - start.lsn, Cluster: end.cluster}
		pg.CommitsPerOrder, pg.WALBytesPerOrder = per(float64(pg.Commits)), per(float64(pg.WALBytes))
		ph.Postgres[name] = pg
	}
	return ph
}

// cpuUnavailable is where a phase records the CPU sources it could not
// read: the run's, or a map of its own when the run samples no CPU (and
// newPhase then has nothing to record).
func (r *Result) cpuUnavailable() map[string]string {
	if r.CPU != nil {
		return r.CPU.Unavailable
	}
	return map[string]string{}
}

// phaseTable renders the phases: one column each.
func phaseTable(b *strings.Builder, row func(k, f string, a ...any), phases []OrderPhase) {
	if len(phases) == 0 {
		return
	}
	b.WriteString("the order's life, phase by phase (each after the one before has settled)\n")
	cols := func(f func(p OrderPhase) string) string {
		var s strings.Builder
		for _, p := range phases {
			fmt.Fprintf(&s, "%-20s ", f(p))
		}
		return strings.TrimRight(s.String(), " ")
	}
	row("", "%s", cols(func(p OrderPhase) string { return p.Name }))
	row("orders", "%s", cols(func(p OrderPhase) string {
		if !p.Complete {
			return fmt.Sprintf("%d (incomplete)", p.Orders)
		}
		return fmt.Sprint(p.Orders)
	}))
	row("seconds / orders/s", "%s", cols(func(p OrderPhase) string { return fmt.Sprintf("%.1f / %.1f", p.Seconds, p.OrdersPerSecond) }))
	row("requests p50/p99 ms", "%s", cols(func(p OrderPhase) string {
		if p.Latency == nil {
			return "–"
		}
		return fmt.Sprintf("%.1f / %.1f", p.Latency.P50, p.Latency.P99)
	}))
	if slices.ContainsFunc(phases, func(p OrderPhase) bool { return p.Payment != nil }) {
		pay := func(f func(p *PhasePayment) string) string {
			return cols(func(p OrderPhase) string {
				if p.Payment == nil {
					return "–"
				}
				return f(p.Payment)
			})
		}
		ms := func(l Latency) string { return fmt.Sprintf("%.1f / %.1f", l.P50, l.P99) }
		row("payment provider", "%s", pay(func(p *PhasePayment) string { return p.Provider }))
		row("  pay page p50/p99 ms", "%s", pay(func(p *PhasePayment) string { return ms(p.Page) }))
		row("  pay submit p50/p99 ms", "%s", pay(func(p *PhasePayment) string { return ms(p.Submit) }))
		row("  capture→PAID p50/p99 ms", "%s", pay(func(p *PhasePayment) string {
			if p.CaptureToPaid == nil {
				return "–"
			}
			return ms(*p.CaptureToPaid)
		}))
		row("  read PAID after", "%s", pay(func(p *PhasePayment) string { return fmt.Sprint(p.Paid) }))
		for _, p := range phases {
			if p.Payment != nil && len(p.Payment.Failed) > 0 {
				row("  not paid: "+p.Name, "%s (first: %s)", outcomes(p.Payment.Failed), p.Payment.FailedSample)
			}
		}
	}
	row("load average before", "%s", cols(func(p OrderPhase) string { return p.LoadBefore }))
	components := map[string]bool{}
	databases := map[string]bool{}
	for _, p := range phases {
		for c := range p.CPUMsPerOrder {
			components[c] = true
		}
		for d := range p.Postgres {
			databases[d] = true
		}
	}
	names := func(m map[string]bool) []string {
		out := make([]string, 0, len(m))
		for n := range m {
			if n != "system" {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return out
	}
	if len(components) > 0 {
		cpu := func(c string) string {
			return cols(func(p OrderPhase) string {
				if v, ok := p.CPUMsPerOrder[c]; ok {
					return fmt.Sprintf("%.2f", v)
				}
				return "–"
			})
		}
		row("cpu ms per order", "%s", cpu("system"))
		for _, c := range names(components) {
			row("  "+c, "%s", cpu(c))
		}
	}
	for _, d := range names(databases) {
		row("postgres "+d, "%s", cols(func(p OrderPhase) string {
			pg, ok := p.Postgres[d]
			if !ok || !p.Complete {
				return "–"
			}
			return fmt.Sprintf("%.1f commits %.1f KB", pg.CommitsPerOrder, pg.WALBytesPerOrder/1000)
		}))
	}
	if len(databases) > 0 {
		row("", "(per order; WAL is its cluster's, so databases of one cluster show the same)")
	}
	for _, p := range phases {
		if p.Note != "" {
			row("note: "+p.Name, "%s", p.Note)
		}
	}
}
