// Package scratch makes directories in memory-backed storage (tmpfs) for
// state that must not outlive the process, and clears away the ones left
// behind by processes that were killed before they could remove their own.
package scratch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Root is Linux's tmpfs for shared memory.
const Root = "/dev/shm"

// Dir returns a new directory under root, named prefix, this process's id
// and a random suffix, or "" where root is not a writable directory (e.g.
// macOS has no /dev/shm). It first removes the directories under root that
// carry prefix and the id of a process that has exited: tmpfs would hold
// them until a reboot.
func Dir(root, prefix string) string {
	if info, err := os.Stat(root); err != nil || !info.IsDir() {
		return ""
	}
	Sweep(root, prefix)
	dir, err := os.MkdirTemp(root, fmt.Sprintf("%s%d-", prefix, os.Getpid()))
	if err != nil {
		return ""
	}
	return dir
}

// Sweep removes the directories under root made by Dir with prefix for
// processes that have exited. A directory whose process is alive, or
// cannot be asked (another user's), stays.
func Sweep(root, prefix string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if exited(pid) {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// exited tells whether no process has the id pid. Signal 0 checks for the
// process without signalling it.
func exited(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	defer func() { _ = p.Release() }() // on Linux it holds a pidfd until then
	return errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone)
}
