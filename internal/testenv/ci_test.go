package testenv

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// CI must run the test command README.md promises, character for character.
func TestCIRunsTheReadmeTestCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)Run the tests.*?```sh\n(go test [^\n]+)\n```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no test command block")
	}
	cmd := string(m[1])
	for _, line := range strings.Split(string(ci), "\n") {
		if strings.TrimSpace(line) == cmd {
			return
		}
	}
	t.Fatalf(".ci/run does not run the README test command %q", cmd)
}

// Every live lease is a database of its own, however many tests ran
// before: a long test's database is never handed out (and flushed) again
// while it runs.
func TestRedisDatabasesAreLeasedOnePerLiveTest(t *testing.T) {
	RedisAddr(t)
	seen := map[int]bool{}
	for range 40 {
		_, db := Redis(t)
		if seen[db] {
			t.Fatalf("database %d handed out twice while its first lease is live", db)
		}
		seen[db] = true
	}
}
