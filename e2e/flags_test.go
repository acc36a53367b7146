package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

// Every flag and environment variable of README.md's configuration table
// exists in the commands the table names, and every flag those commands
// have is in the table.
func TestReadmeConfigurationTableMatchesTheBinary(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?s)## Configuration\n(.*?)\n## ").FindSubmatch(readme)
	if section == nil {
		t.Fatal("README.md has no Configuration section")
	}
	row := regexp.MustCompile("(?m)^\\| `(--[a-z-]+)` \\| `([A-Z_]+)` \\| [^|]* \\| ([^|]+) \\|")
	help := map[string]string{}
	helpOf := func(cmd string) string {
		if h, ok := help[cmd]; ok {
			return h
		}
		out, err := exec.Command(testenv.Binary(t), cmd, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("seckill %s --help: %v\n%s", cmd, err, out)
		}
		help[cmd] = string(out)
		return help[cmd]
	}
	listed := map[string]map[string]bool{} // command -> flags in the table
	rows := row.FindAllSubmatch(section[1], -1)
	if len(rows) < 10 {
		t.Fatalf("only %d rows parsed from the configuration table", len(rows))
	}
	for _, m := range rows {
		flag, env, cmds := string(m[1]), string(m[2]), strings.TrimSpace(string(m[3]))
		var names []string
		if cmds == "all" {
			names = []string{"serve", "worker", "dev", "migrate", "audit"}
		} else {
			names = strings.Split(cmds, ", ")
		}
		for _, cmd := range names {
			h := helpOf(cmd)
			if !strings.Contains(h, flag+"=") && !strings.Contains(h, flag+" ") && !strings.Contains(h, flag+"\n") {
				t.Errorf("README lists %s for %s, but `seckill %s --help` has no such flag", flag, cmd, cmd)
			}
			if cmd != "temporal" && !strings.Contains(h, "$"+env+")") {
				t.Errorf("README lists %s for %s, but its help names no $%s", env, cmd, env)
			}
			if listed[cmd] == nil {
				listed[cmd] = map[string]bool{}
			}
			listed[cmd][flag] = true
		}
	}
	// The reverse: the operational commands have no flag the table omits.
	flagRE := regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z][a-z-]+)`)
	for _, cmd := range []string{"serve", "worker", "dev"} {
		for _, m := range flagRE.FindAllStringSubmatch(helpOf(cmd), -1) {
			f := m[1]
			if f == "--help" {
				continue
			}
			if !listed[cmd][f] {
				t.Errorf("`seckill %s` has %s, which README's configuration table does not list for it", cmd, f)
			}
		}
	}
}

// A wait for replicas that the Redis client's reply read cannot outlast is
// refused at start: every slow acknowledgement would end in a read
// timeout, whose outcome no one knows, instead of an answer.
func TestServeRefusesAnAckTimeoutPastTheReadTimeout(t *testing.T) {
	for _, timeout := range []string{"5s", "0s"} {
		cmd := exec.Command(testenv.Binary(t), "serve", "--admit-ack=replica", "--admit-ack-timeout="+timeout)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+testenv.DatabaseURL(t), "REDIS_ADDR="+testenv.RedisAddr(t),
			"SECKILL_JWT_SECRET=0123456789abcdef0123456789abcdef")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--admit-ack-timeout") {
			t.Errorf("serve --admit-ack-timeout=%s: %v, want a refusal naming the flag\n%s", timeout, err, out)
		}
	}
}

// --admit-fence takes auto, off or a Sentinel URL, and a fence needs
// acknowledgement: anything else is refused at start, naming the flag.
func TestServeRefusesAFenceItCannotKeep(t *testing.T) {
	for _, args := range [][]string{
		{"--admit-ack=replica", "--admit-fence=sentinels"},
		{"--admit-ack=replica", "--admit-fence=redis://127.0.0.1:1/0"},
		{"--admit-ack=none", "--admit-fence=redis://127.0.0.1:1/0?master_name=seckill"},
	} {
		cmd := exec.Command(testenv.Binary(t), append([]string{"serve"}, args...)...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+testenv.DatabaseURL(t), "REDIS_ADDR="+testenv.RedisAddr(t),
			"SECKILL_JWT_SECRET=0123456789abcdef0123456789abcdef")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--admit-fence") {
			t.Errorf("serve %v: %v, want a refusal naming the flag\n%s", args, err, out)
		}
	}
}

// A payment provider whose secrets are missing is refused at start, by the
// api and by the worker alike, naming the environment variables to set.
func TestPaymentProviderWithoutSecretsIsRefused(t *testing.T) {
	for _, tc := range []struct {
		cmd, provider string
		want          []string
	}{
		{"serve", "builtin", []string{"SECKILL_BUILTINPAY_SECRET_KEY", "SECKILL_BUILTINPAY_WEBHOOK_SECRET"}},
		{"worker", "builtin", []string{"SECKILL_BUILTINPAY_SECRET_KEY", "SECKILL_BUILTINPAY_WEBHOOK_SECRET"}},
		{"serve", "stripe", []string{"STRIPE_SECRET_KEY", "STRIPE_WEBHOOK_SECRET"}},
		{"worker", "stripe", []string{"STRIPE_SECRET_KEY", "STRIPE_WEBHOOK_SECRET"}},
	} {
		cmd := exec.Command(testenv.Binary(t), tc.cmd, "--payment-provider="+tc.provider)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+testenv.DatabaseURL(t), "REDIS_ADDR="+testenv.RedisAddr(t),
			"SECKILL_JWT_SECRET=0123456789abcdef0123456789abcdef", "SECKILL_BUILTINPAY_SECRET_KEY=", "SECKILL_BUILTINPAY_WEBHOOK_SECRET=",
			"STRIPE_SECRET_KEY=", "STRIPE_WEBHOOK_SECRET=")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s --payment-provider=%s started without its secrets", tc.cmd, tc.provider)
			continue
		}
		for _, env := range tc.want {
			if !strings.Contains(string(out), env) {
				t.Errorf("%s --payment-provider=%s: %v, want a refusal naming %s\n%s", tc.cmd, tc.provider, err, env, out)
			}
		}
	}
}
