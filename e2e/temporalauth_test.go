package e2e

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

// The commands take Temporal's API key from the environment, as a Cloud
// deployment sets it: `seckill migrate` (whose Temporal step is the same
// client every command builds) registers its search attributes on a server
// that refuses calls without the key, and is refused without it.
// internal/temporalconf's tests cover TLS and mTLS.
func TestCommandsSendTheTemporalAPIKey(t *testing.T) {
	tp := testenv.NewTemporal(t)
	tp.Args = []string{"--api-key", "deploy-key"}
	tp.Start()
	migrate := func(env ...string) (string, error) {
		cmd := exec.Command(testenv.Binary(t), "migrate")
		cmd.Env = append(cmd.Environ(), append([]string{
			"DATABASE_URL=" + testenv.DatabaseURL(t), "REDIS_ADDR=" + testenv.RedisAddr(t),
			"TEMPORAL_ADDRESS=" + tp.Address(), "TEMPORAL_TLS=off",
		}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	withKey, err := migrate("TEMPORAL_API_KEY=deploy-key")
	if err != nil || !strings.Contains(withKey, "search attributes registered") {
		t.Fatalf("migrate with the key: %v\n%s", err, withKey)
	}
	out, err := migrate()
	if err == nil || !strings.Contains(out, "unauthorized") && !strings.Contains(out, "PermissionDenied") && !strings.Contains(out, "API key") {
		t.Fatalf("migrate without the key: %v, want refused\n%s", err, out)
	}
	if strings.Contains(out+withKey, "deploy-key") {
		t.Fatal("the key appears in the output")
	}
}
