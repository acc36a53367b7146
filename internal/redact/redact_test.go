package redact

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestURL(t *testing.T) {
	for raw, want := range map[string]string{
		// Parsed by net/url.
		"postgres://seckill:hunter2@db:5432/seckill?sslmode=disable": "postgres://seckill:xxxxx@db:5432/seckill?sslmode=disable",
		"redis://:hunter2@redis:6379/0":                              "redis://:xxxxx@redis:6379/0",
		"postgres://u:p%40ss%2Fw0rd@db/x":                            "postgres://u:xxxxx@db/x",
		"postgres://u@db/x?password=hunter2&sslmode=require":         "postgres://u@db/x?password=xxxxx&sslmode=require",
		"redis://s1:26379?master_name=m&sentinel_password=hunter2":   "redis://s1:26379?master_name=m&sentinel_password=xxxxx",
		"postgres://u:1@db:5441/x":                                   "postgres://u:xxxxx@db:5441/x",
		// Refused by net/url: cut by hand.
		"postgres://u:hunter2@db:badport/x":   "postgres://u:xxxxx@db:badport/x",
		"postgres://u:hun/ter?2#@db:5432/x":   "postgres://u:xxxxx@db:5432/x",
		"redis://:hunter2@[::1/0?password=pw": "redis://:xxxxx@[::1/0?password=xxxxx",
		// Nothing to hide.
		"127.0.0.1:6379":            "127.0.0.1:6379",
		"sqlite:/tmp/seckill.db":    "sqlite:/tmp/seckill.db",
		"http://collector:4318":     "http://collector:4318",
		"postgres://u@db:5432/x":    "postgres://u@db:5432/x",
		"redis://:@db:6379/0?db=15": "redis://:@db:6379/0?db=15",
	} {
		if got := URL(raw); got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
}

// The errors the parsers really return, which quote the URL.
func TestError(t *testing.T) {
	for _, raw := range []string{
		"postgres://u:hunter2@db:badport/x",
		"postgres://u:hunter2@[::1/x",
		`postgres://u:hun"ter\2@db:bad/x`,
		"redis://:hunter2@redis:bad/0",
		"redis://u:hunter2@redis:6379/0?bogus=1",
	} {
		_, perr := url.Parse(raw)
		_, rerr := redis.ParseURL(raw)
		for _, err := range []error{perr, rerr} {
			if err == nil {
				continue
			}
			got := Error(err, raw)
			for _, pw := range []string{"hunter2", `hun"ter\2`, `hun\"ter\\2`} {
				if strings.Contains(got.Error(), pw) {
					t.Errorf("%q: %q still has the password", raw, got)
				}
			}
			if !errors.Is(got, err) {
				t.Errorf("%q: the redacted error does not wrap the original", raw)
			}
		}
	}
	if err := Error(context.Canceled, "postgres://u:hunter2@db/x"); err != context.Canceled {
		t.Errorf("an error without the password is changed: %v", err)
	}
	if Error(nil, "postgres://u:hunter2@db/x") != nil {
		t.Error("Error(nil) is not nil")
	}
}
