package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server process of the test's own, which it can
// restart: with AOF (appendfsync everysec) an accepted write survives, without
// it the data is gone, like a production Redis without persistence.
type RedisServer struct {
	t    testing.TB
	port int
	dir  string
	aof  bool
	args []string // more of redis-server's arguments
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedisServer starts redis-server on a free port, with more of its
// arguments if given.
func StartRedisServer(t testing.TB, aof bool, args ...string) *RedisServer {
	t.Helper()
	RedisAddr(t) // skip or fail like every Redis-backed test
	r := &RedisServer{t: t, port: FreePort(t), dir: t.TempDir(), aof: aof, args: args}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// Addr is host:port.
func (r *RedisServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

// Start starts the server and waits until it answers.
func (r *RedisServer) Start() {
	r.t.Helper()
	aof := "no"
	if r.aof {
		aof = "yes"
	}
	args := append([]string{"--port", fmt.Sprint(r.port), "--bind", "127.0.0.1",
		"--dir", r.dir, "--save", "", "--appendonly", aof, "--appendfsync", "everysec"}, r.args...)
	r.cmd = exec.Command("redis-server", args...)
	// Its log, to say why when it exits before it answers (a port it
	// could not bind, an argument it refused).
	out := &SyncBuffer{}
	r.cmd.Stdout, r.cmd.Stderr = out, out
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer c.Close()
	Eventually(r.t, 10*time.Second, func() error {
		select {
		case <-r.done:
			r.t.Fatalf("redis-server %v exited before it answered:\n%s", args, out.String())
		default:
		}
		return c.Ping(context.Background()).Err()
	})
}

// SyncBuffer is a bytes.Buffer that one goroutine (a process's output, a
// logger) writes while a test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Stop shuts the server down (SIGTERM: the AOF, if on, is flushed; without
// persistence everything is gone).
func (r *RedisServer) Stop() {
	if r.cmd == nil {
		return
	}
	stopOrKill(r.cmd, r.done, syscall.SIGTERM)
	r.cmd = nil
}

// Kill ends the server with SIGKILL, as a lost host would: nothing is
// flushed.
func (r *RedisServer) Kill() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// Restart kills and starts the server on the same port and directory.
func (r *RedisServer) Restart() {
	r.t.Helper()
	r.Stop()
	r.Start()
}

// stopOrKill signals cmd and waits for done (closed when it has exited),
// killing it after 10 s.
func stopOrKill(cmd *exec.Cmd, done <-chan struct{}, sig os.Signal) {
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Pause stops the server with SIGSTOP, as a host that hangs would: its
// connections stay open and nothing answers until Resume.
func (r *RedisServer) Pause() { _ = r.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (r *RedisServer) Resume() { _ = r.cmd.Process.Signal(syscall.SIGCONT) }
