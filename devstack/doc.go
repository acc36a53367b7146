// Package devstack runs development infrastructure inside the current process,
// so that the zero-install dev mode and the integration tests need nothing but
// the Go toolchain.
//
// StartTemporal runs a real Temporal server (go.temporal.io/server, all four
// services in one process) on SQLite persistence, in memory by default (a
// WAL-mode file on tmpfs, /dev/shm, where the machine has it; SQLite's memory
// mode elsewhere) or in a file for persistence across restarts, together with the Temporal Web UI
// (github.com/temporalio/ui-server). Every port it listens on is either the one
// asked for, checked to be free beforehand, or a free one picked at start, so
// several servers can run side by side on one machine, e.g. in parallel tests.
//
// Figures measured on a 2-core machine before seckill's saga existed (2,000
// workflows of three no-op activities, worker in the same process): the server
// starts in about a second, completes roughly 15–25 workflows per second with
// default settings (about 87 with local activities and eager start, as seckill
// runs them) and uses ~400 MiB of RSS; docs/performance.md has seckill's own
// figures. It is meant for development and tests, not for production.
//
// Limitations inherited from the server's SQLite plugin:
//   - the plugin keeps one connection per database open for the life of the
//     process, even after Stop: an in-memory database is not freed when its
//     server stops (each StartTemporal with DBFile == "" costs memory until the
//     process exits), and a database file stays open;
//   - a DBFile must not be used by two servers at the same time.
//
// StartRedis runs an in-process Redis (miniredis) for dev mode: it keeps
// nothing across restarts.
//
// The files follow the server's start: options.go (TemporalOptions and
// their defaults), ports.go (the ports reserved for each service),
// persistence.go (the SQLite database), namespace.go (the namespace, its
// retention and search attributes), ui.go (the Web UI), logging.go (the
// server's log into slog), temporal.go (StartTemporal and Stop), redis.go.
package devstack
