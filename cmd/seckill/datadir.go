package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/seckill/seckill/auth"
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

// defaultDataDir is where `seckill dev` keeps its state unless told
// otherwise (--data-dir), and where token and bench look for its secret.
const defaultDataDir = ".seckill"

// devSecretName is the file in dev's data directory that holds its token
// secret.
const devSecretName = "jwt-secret"

// devSecret returns the path of the data directory's token secret,
// creating it (random, readable by its owner only) on the first start.
func devSecret(dir string) (string, error) {
	return devSecretFile(dir, devSecretName, "token secret")
}

// devSecretFile returns the path of the data directory's secret name,
// creating it (random, readable by its owner only) on the first start.
func devSecretFile(dir, name, what string) (string, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return path, nil
	}
	if err != nil {
		return "", fmt.Errorf("dev's %s: %w", what, err)
	}
	defer f.Close()
	if _, err := f.WriteString(auth.RandomSecret() + "\n"); err != nil {
		return "", fmt.Errorf("dev's %s: %w", what, err)
	}
	return path, nil
}

// devSecretHere is dev's token secret in this directory's data directory
// (SECKILL_DATA_DIR or .seckill), if there is one: what `seckill token` and
// `seckill bench` use when given no secret, so that they work against the
// `seckill dev` started here without copying its secret around.
func devSecretHere() string {
	dir := os.Getenv("SECKILL_DATA_DIR")
	if dir == "" {
		dir = defaultDataDir
	}
	path := filepath.Join(dir, devSecretName)
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// dataFormat is the version of what `seckill dev` keeps in its data
// directory. A directory without the marker was made before it existed
// and is upgraded in place (the schemas migrate on start); one made by a
// newer build is refused, with the way to start fresh.
const (
	dataFormat     = 1
	dataFormatName = "format"
)

// prepareDataDir checks the data directory's format, or with reset deletes
// what an earlier dev kept there, and marks it with this build's format.
// The caller holds the directory's lock.
func prepareDataDir(dir string, reset bool) error {
	marker := filepath.Join(dir, dataFormatName)
	if reset {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("reset %s: %w", dir, err)
		}
		for _, e := range entries {
			if e.Name() == "lock" { // held by this process
				continue
			}
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("reset %s: %w", dir, err)
			}
		}
		slog.Info("--reset: deleted what the data directory kept (sales, orders, workflows, the token secret)", "dir", dir)
	}
	b, err := os.ReadFile(marker)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, serr := os.Stat(filepath.Join(dir, "seckill.db")); serr == nil {
			slog.Info("data directory made by an earlier build: upgraded in place", "dir", dir)
		}
	case err != nil:
		return fmt.Errorf("data dir: %w", err)
	default:
		got, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if perr != nil || got > dataFormat {
			return fmt.Errorf("the data directory %s was made by a newer seckill (format %q, this build reads %d): run that build, or start fresh with --reset, which deletes its data", dir, strings.TrimSpace(string(b)), dataFormat)
		}
	}
	return os.WriteFile(marker, []byte(strconv.Itoa(dataFormat)+"\n"), 0o644)
}
