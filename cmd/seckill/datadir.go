package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDataDir takes the data directory for this process alone: two
// `seckill dev` on one directory would share the embedded Temporal's
// database and fight over its shard (each taking it from the other) while
// both went on admitting. The lock is an flock on DIR/lock, which the
// kernel drops when the process ends, however it ends; the file holds the
// owner's pid, for the message the next one prints.
func lockDataDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(owner))); perr == nil {
				who = fmt.Sprintf("another seckill dev (pid %d)", pid)
			}
			return nil, fmt.Errorf("%s is using the data directory %s: stop it, or give this one another --data-dir (or --memory)", who, dir)
		}
		return nil, fmt.Errorf("lock the data directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
