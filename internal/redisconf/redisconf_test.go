package redisconf

import (
	"slices"
	"strings"
	"testing"
)

// --redis-addr is a Sentinel URL only when it names a master; its
// credentials reach the primary too, and never an error message.
func TestFailoverOptions(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:6379", "redis://127.0.0.1:6379/2", "redis://:pw@host:6379/0"} {
		if _, ok, err := failoverOptions(addr); ok || err != nil {
			t.Errorf("%s: taken for a Sentinel URL (%v)", addr, err)
		}
	}
	fo, ok, err := failoverOptions("redis://:s3cret@s1:26379/3?master_name=shop&addr=s2:26379&addr=s3:26379")
	if !ok || err != nil {
		t.Fatalf("Sentinel URL not parsed: %v", err)
	}
	if fo.MasterName != "shop" || fo.DB != 3 || !slices.Equal(fo.SentinelAddrs, []string{"s1:26379", "s2:26379", "s3:26379"}) ||
		fo.SentinelPassword != "s3cret" || fo.Password != "s3cret" {
		t.Fatalf("parsed %+v", fo)
	}
	if _, ok, err := failoverOptions("redis://s1:26379/?master_name=shop&bogus=1"); !ok || err == nil {
		t.Fatal("an unknown parameter of a Sentinel URL is not an error")
	}
	if _, err := Open("redis://:s3cret@s1:26379/x?master_name=shop"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("bad Sentinel URL: %v (want an error without the password)", err)
	}
}
