package scratch_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/scratch"
)

// exitedPID is the id of a process that has run and been waited for.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.Pid()
}

func TestDirSweepsOnlyTheDirectoriesOfExitedProcesses(t *testing.T) {
	root := t.TempDir()
	const prefix = "seckill-test-"
	mk := func(name string) string {
		p := filepath.Join(root, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "db"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dead := mk(fmt.Sprintf("%s%d-1", prefix, exitedPID(t)))
	live := mk(fmt.Sprintf("%s%d-1", prefix, os.Getppid()))
	mine := mk(fmt.Sprintf("%s%d-1", prefix, os.Getpid()))
	other := mk(fmt.Sprintf("other-%d-1", exitedPID(t)))
	odd := mk(prefix + "notapid-1")

	dir := scratch.Dir(root, prefix)
	if dir == "" {
		t.Fatal("no directory made under a writable root")
	}
	if filepath.Dir(dir) != root || !strings.HasPrefix(filepath.Base(dir), fmt.Sprintf("%s%d-", prefix, os.Getpid())) {
		t.Fatalf("directory %s: want %s/%s%d-…", dir, root, prefix, os.Getpid())
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the exited process's directory is still there (%v)", err)
	}
	for _, keep := range []string{live, mine, other, odd, dir} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s was removed: %v", keep, err)
		}
	}
}

func TestDirWithoutRoot(t *testing.T) {
	if dir := scratch.Dir(filepath.Join(t.TempDir(), "absent"), "x-"); dir != "" {
		t.Fatalf("made %s under a missing root", dir)
	}
}
