// Command seckill is the whole flash-sale system in one binary: the api,
// the worker, migrations, the embedded dev stack, the load generator and the
// invariant audit, one subcommand each.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/internal/redact"
)

// CLI is every command, flag and environment variable of seckill. It is the
// one place configuration is read.
type CLI struct {
	LogLevel  string `name:"log-level" env:"SECKILL_LOG_LEVEL" default:"info" enum:"debug,info,warn,error" help:"Minimum level of log lines (${enum})."`
	LogFormat string `name:"log-format" env:"SECKILL_LOG_FORMAT" default:"text" enum:"text,json" help:"Log line format (${enum})."`
	PprofAddr string `name:"pprof-addr" env:"SECKILL_PPROF_ADDR" help:"Serve Go profiles (/debug/pprof/) on this address, e.g. 127.0.0.1:6060 (empty = off; never expose it publicly)."`

	Dev         DevCmd         `cmd:"" help:"Run the whole system in one process with nothing installed (embedded Temporal + Web UI, Redis, database)."`
	Serve       ServeCmd       `cmd:"" help:"Run an api instance (REST API, websocket, relay)."`
	Temporal    TemporalCmd    `cmd:"" help:"Run the embedded Temporal dev server (with its Web UI) on its own."`
	Migrate     MigrateCmd     `cmd:"" help:"Create or update the database schema and register the Temporal search attributes."`
	Worker      WorkerCmd      `cmd:"" help:"Run the order saga worker."`
	Audit       AuditCmd       `cmd:"" help:"Check the invariants of a sale (docs/design.md §2); exits 1 on any violation."`
	Reconcile   ReconcileCmd   `cmd:"" help:"Repair Redis/Postgres drift of live sales once (the worker also does it periodically)."`
	Token       TokenCmd       `cmd:"" help:"Print a signed bearer token."`
	Bench       BenchCmd       `cmd:"" help:"Race U buyers for S units against a running system and check the invariants."`
	Watch       WatchCmd       `cmd:"" help:"Print a buyer's order events from the websocket as JSON lines."`
	Export      ExportCmd      `cmd:"" help:"Write a sale's orders to standard output as CSV or NDJSON (admin token)."`
	Healthcheck HealthcheckCmd `cmd:"" help:"Probe a URL; exit 0 on 200 (container healthchecks)."`
}

func main() {
	var cli CLI
	kctx := kong.Parse(&cli,
		kong.Name("seckill"),
		kong.Description("A flash-sale order system on Redis, Postgres and Temporal."),
		kong.UsageOnError(),
		kong.Vars{"default_data_dir": defaultDataDir},
	)
	setupLogging(cli.LogLevel, cli.LogFormat)
	warnSecretsOnCommandLine(kctx)
	// Drills and the chaos suite stop a process at a named write
	// (docs/reliability.md, "Fault points"); never set in production.
	if points, err := fault.FromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "seckill:", err)
		os.Exit(2)
	} else if len(points) > 0 {
		slog.Warn("SECKILL_FAULTS armed: this process fails on purpose at these points", "points", points)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	kctx.BindTo(ctx, (*context.Context)(nil))
	if cli.PprofAddr != "" {
		go func() {
			if err := serveHTTP(ctx, cli.PprofAddr, profiles(), nil); err != nil {
				slog.Error("pprof endpoint", "err", err)
			}
		}()
	}
	if err := kctx.Run(&cli); err != nil {
		// Once: a log line where logs are read by machines, a plain line
		// for a person at a terminal.
		if cli.LogFormat == "json" {
			slog.Error(err.Error())
		} else {
			fmt.Fprintln(os.Stderr, "seckill:", err)
		}
		os.Exit(exitCode(err))
	}
}

// warnSecretsOnCommandLine warns of each flag tagged secret that was given
// on the command line, where ps and /proc/PID/cmdline show it to every user
// of the host, rather than in the environment or a file: a secret flag
// (secret:""), or a URL flag whose value holds a password (secret:"url").
// Kong marks the flags it filled from the environment as resolved, and
// only those given as arguments as not.
func warnSecretsOnCommandLine(kctx *kong.Context) {
	for _, p := range kctx.Path {
		if p.Flag == nil || p.Resolved || !p.Flag.Tag.Has("secret") {
			continue
		}
		if p.Flag.Tag.Get("secret") == "url" {
			if v, _ := kctx.FlagValue(p.Flag).(string); len(redact.Passwords(v)) == 0 {
				continue
			}
		}
		slog.Warn("a secret was given on the command line, where ps shows it to every user of this host: pass it in the environment instead",
			"flag", "--"+p.Flag.Name, "env", strings.Join(p.Flag.Envs, ","))
	}
}

// exitError carries a specific exit code (audit violations exit 1, usage
// errors 2).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	// As, not a type assertion: kong wraps what a command's Run returns.
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return 1
}

// profiles serves net/http/pprof on its own mux, so the profiles never
// appear on the api's public listener.
func profiles() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

func setupLogging(level, format string) {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if format == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	slog.SetDefault(slog.New(h))
}
