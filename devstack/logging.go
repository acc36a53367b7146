package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// fatalPanic is what serverLogger panics with on Fatal and Panic; being an
// error, it ends up wrapped in the error recoverFatal returns.
type fatalPanic struct{ msg string }

func (f fatalPanic) Error() string { return f.msg }

// recoverFatal runs fn and turns a panic, typically serverLogger.Fatal's on a
// port the server could not bind, into an error instead of a crashed process.
// Where the server logs Fatal in a background goroutine, the process still dies.
func recoverFatal(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = fmt.Errorf("panic: %w", e)
				return
			}
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("devstack: unknown log level %q (want debug, info, warn or error)", s)
}

// levelHandler drops records below min before they reach next, whatever level
// next itself is set to: the caller's logger may well be at debug.
type levelHandler struct {
	min  slog.Level
	next slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.next.Enabled(ctx, l)
}

func (h levelHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.next.Handle(ctx, r)
}

func (h levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelHandler{min: h.min, next: h.next.WithAttrs(attrs)}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{min: h.min, next: h.next.WithGroup(name)}
}

// serverLogger adapts a *slog.Logger to the server's log.Logger.
type serverLogger struct {
	l     *slog.Logger
	quiet *atomic.Bool // set: drop everything, the server is stopping
}

var (
	_ log.Logger     = serverLogger{}
	_ log.WithLogger = serverLogger{}
)

func (s serverLogger) Debug(msg string, tags ...tag.Tag) { s.log(slog.LevelDebug, msg, tags) }
func (s serverLogger) Info(msg string, tags ...tag.Tag)  { s.log(slog.LevelInfo, msg, tags) }
func (s serverLogger) Warn(msg string, tags ...tag.Tag)  { s.log(slog.LevelWarn, msg, tags) }
func (s serverLogger) Error(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

// DPanic panics only in the server's development builds; log it as an error.
func (s serverLogger) DPanic(msg string, tags ...tag.Tag) { s.log(slog.LevelError, msg, tags) }

func (s serverLogger) Panic(msg string, tags ...tag.Tag) {
	s.log(slog.LevelError, msg, tags)
	panic(fatalPanic{msg: msg})
}

// Fatal panics instead of exiting as the server's zap logger does, so that a
// fatal error during NewServer or Start comes back from StartTemporal as an
// error. The server's code after Fatal assumes it does not return.
func (s serverLogger) Fatal(msg string, tags ...tag.Tag) {
	s.log(slog.LevelError, msg, tags)
	panic(fatalPanic{msg: msg + tagSummary(tags)})
}

func (s serverLogger) With(tags ...tag.Tag) log.Logger {
	args := make([]any, 0, len(tags))
	for _, t := range tags {
		args = append(args, slog.Any(t.Key(), t.Value()))
	}
	return serverLogger{l: s.l.With(args...), quiet: s.quiet}
}

func (s serverLogger) log(level slog.Level, msg string, tags []tag.Tag) {
	ctx := context.Background()
	// Tag values are rendered lazily: most lines are below the level.
	if s.quiet.Load() || !s.l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(tags))
	for _, t := range tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	s.l.LogAttrs(ctx, level, msg, attrs...)
}

func tagSummary(tags []tag.Tag) string {
	var b strings.Builder
	for _, t := range tags {
		fmt.Fprintf(&b, " %s=%v", t.Key(), t.Value())
	}
	return b.String()
}
