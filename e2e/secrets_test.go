package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/internal/testenv"
)

// seckillOnce runs a one-shot command of the binary with only env (and
// PATH, HOME) in its environment, and returns its exit code and everything
// it wrote to stdout and stderr.
func seckillOnce(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Binary(t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case ctx.Err() != nil:
		t.Fatalf("seckill %v did not finish:\n%s", args, out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("seckill %v: %v", args, err)
	return 0, ""
}

// A password in a service URL appears in no error or log line of the
// binary, whether the URL fails to parse (url.Parse, which lib/pq and
// go-redis call, quotes the whole URL in its error) or parses and the
// service cannot be reached.
func TestPasswordsStayOutOfErrorsAndLogs(t *testing.T) {
	const pw = "Hunter2-e2e-pw"
	closed := testenv.FreePort(t) // nothing listens there
	db := testenv.DatabaseURL(t)
	serve := func(redisAddr string) []string {
		return []string{"SECKILL_JWT_SECRET=" + secret, "DATABASE_URL=" + db, "REDIS_ADDR=" + redisAddr,
			"SECKILL_HTTP_ADDR=127.0.0.1:0", "SECKILL_METRICS_ADDR=127.0.0.1:0",
			// An OTLP endpoint with credentials, logged when tracing starts.
			fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://otel:%s@127.0.0.1:%d", pw, closed)}
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string // in the output: the failure was the URL's
	}{
		{"database url that does not parse", nil,
			[]string{"migrate", "--database-url", "postgres://seckill:" + pw + "@127.0.0.1:notaport/seckill"}, "invalid port"},
		{"database url with the password as a parameter", nil,
			[]string{"migrate", "--database-url", "postgres://seckill@127.0.0.1:notaport/seckill?password=" + pw}, "invalid port"},
		{"database that cannot be reached", []string{fmt.Sprintf("DATABASE_URL=postgres://seckill:%s@127.0.0.1:%d/seckill?sslmode=disable", pw, closed)},
			[]string{"migrate"}, "connection refused"},
		{"redis url that does not parse", serve("redis://:" + pw + "@127.0.0.1:notaport/0"),
			[]string{"serve"}, "invalid port"},
		{"sentinel url that does not parse", serve(fmt.Sprintf("redis://:%s@127.0.0.1:%d/0?master_name=m&bogus=1", pw, closed)),
			[]string{"serve"}, "bogus"},
		{"redis that cannot be reached", serve(fmt.Sprintf("redis://:%s@127.0.0.1:%d/0", pw, closed)),
			[]string{"serve"}, "connection refused"},
		{"bench's redis url", []string{"SECKILL_JWT_SECRET=" + secret},
			[]string{"bench", "--redis-addr", "redis://:" + pw + "@127.0.0.1:notaport/0"}, "invalid port"},
		{"temporal's postgres url that does not parse", []string{"SECKILL_TEMPORAL_POSTGRES_URL=postgres://temporal:" + pw + "@127.0.0.1:notaport/temporal"},
			[]string{"temporal", "--port=0", "--ui-port=-1"}, "invalid port"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := seckillOnce(t, c.env, c.args...)
			if code == 0 || !strings.Contains(out, c.want) {
				t.Fatalf("exit %d, want a failure mentioning %q:\n%s", code, c.want, out)
			}
			if strings.Contains(out, pw) {
				t.Fatalf("the password is in the output:\n%s", out)
			}
			// A URL with a password on the command line is in ps too.
			if onCommandLine := strings.Contains(strings.Join(c.args, " "), pw); strings.Contains(out, "given on the command line") != onCommandLine {
				t.Fatalf("warning that the password shows in ps: want %v:\n%s", onCommandLine, out)
			}
		})
	}
}

// The token secret comes from the environment or a file; on the command
// line it works but draws a warning (ps shows it), and a value and a file
// together are refused.
func TestJWTSecretSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "jwt-secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	const warning = "given on the command line"
	for _, c := range []struct {
		name string
		env  []string
		args []string
		warn bool
	}{
		{"environment", []string{"SECKILL_JWT_SECRET=" + secret}, nil, false},
		{"file flag", nil, []string{"--jwt-secret-file", file}, false},
		{"file in the environment", []string{"SECKILL_JWT_SECRET_FILE=" + file}, nil, false},
		{"command line", nil, []string{"--jwt-secret", secret}, true},
		{"previous secret on the command line", []string{"SECKILL_JWT_SECRET=" + secret}, []string{"--jwt-previous-secret", strings.Repeat("p", 32)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := seckillOnce(t, c.env, append([]string{"token", "--user", "frank"}, c.args...)...)
			tok := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			if u, err := signer.Verify(tok); err != nil || u.ID != "frank" {
				t.Fatalf("the token printed (%q) is not the secret's: %+v %v", tok, u, err)
			}
			if strings.Contains(out, warning) != c.warn {
				t.Fatalf("warning that the secret shows in ps: %v, want %v:\n%s", !c.warn, c.warn, out)
			}
			if strings.Count(out, secret) > strings.Count(strings.Join(c.args, " "), secret) {
				t.Fatalf("the secret is in the output:\n%s", out)
			}
		})
	}
	code, out := seckillOnce(t, []string{"SECKILL_JWT_SECRET=" + secret, "SECKILL_JWT_SECRET_FILE=" + file}, "token", "--user", "frank")
	if code == 0 || !strings.Contains(out, "both set") {
		t.Fatalf("a secret and a secret file together: exit %d:\n%s", code, out)
	}
}

// seckill token mints no token that lives longer than its role allows.
func TestTokenLifetimeBounded(t *testing.T) {
	env := []string{"SECKILL_JWT_SECRET=" + secret}
	for _, args := range [][]string{{"--ttl", "25h"}, {"--role", "admin", "--ttl", "13h"}, {"--ttl", "8760h"}, {"--ttl=0s"}} {
		code, out := seckillOnce(t, env, append([]string{"token", "--user", "gina"}, args...)...)
		if code != 2 || !strings.Contains(out, "--ttl") || strings.Contains(out, "eyJ") {
			t.Errorf("seckill token %v: exit %d, want 2 and no token:\n%s", args, code, out)
		}
	}
	code, out := seckillOnce(t, env, "token", "--user", "gina", "--role", "admin", "--ttl", "12h")
	if code != 0 {
		t.Fatalf("a 12h admin token: exit %d:\n%s", code, out)
	}
	var c auth.Claims
	if _, _, err := jwt.NewParser().ParseUnverified(strings.TrimSpace(out), &c); err != nil || c.ExpiresAt.Sub(c.IssuedAt.Time) != 12*time.Hour {
		t.Fatalf("12h admin token: %+v %v", c, err)
	}
}
