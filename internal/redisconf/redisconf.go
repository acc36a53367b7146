// Package redisconf turns seckill's Redis addresses into go-redis clients:
// host:port, a redis:// URL, or go-redis's Sentinel (failover) URL, whose
// client follows the primary across failovers (docs/design.md §3.13).
package redisconf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/redact"
)

// Options are the options of a plain client of addr. For a Sentinel
// URL they are the current primary's, as the Sentinels name it: for the
// bench's scratch measurements, which need no failover.
func Options(addr string) (*redis.Options, error) {
	if fo, ok, err := failoverOptions(addr); ok || err != nil {
		if err != nil {
			return nil, addrError(addr, err)
		}
		return primaryOptions(fo)
	}
	if strings.Contains(addr, "://") {
		o, err := redis.ParseURL(addr)
		if err != nil {
			return nil, addrError(addr, err)
		}
		return o, nil
	}
	return &redis.Options{Addr: addr}, nil
}

// addrError is err about addr, which go-redis's URL parsing quotes whole
// (its url.Parse errors), with the password masked.
func addrError(addr string, err error) error {
	return redact.Error(fmt.Errorf("redis address %q: %w", redact.URL(addr), err), addr)
}

func Open(addr string) (*redis.Client, error) {
	if fo, ok, err := failoverOptions(addr); ok || err != nil {
		if err != nil {
			return nil, addrError(addr, err)
		}
		return OpenFailover(fo), nil
	}
	opts, err := Options(addr)
	if err != nil {
		return nil, err
	}
	// Admission runs many short scripts at once; the relay holds blocking
	// reads too. The default pool (10 per CPU) is too small for a sale.
	opts.PoolSize = 256
	opts.MinIdleConns = 8
	return redis.NewClient(opts), nil
}

// failoverOptions parses a Sentinel URL: a redis:// URL with master_name
// (go-redis's failover URL; the URL's user and password are the
// Sentinels', and the primary's too unless the URL says otherwise). ok is
// false for any other address.
func failoverOptions(addr string) (*redis.FailoverOptions, bool, error) {
	u, err := url.Parse(addr)
	if err != nil || !strings.Contains(addr, "://") || !u.Query().Has("master_name") {
		return nil, false, nil
	}
	fo, err := redis.ParseFailoverURL(addr)
	if err != nil {
		return nil, true, err
	}
	if fo.Password == "" {
		fo.Username, fo.Password = fo.SentinelUsername, fo.SentinelPassword
	}
	return fo, true, nil
}

// primaryOptions asks the Sentinels of fo, in turn, for the primary.
func primaryOptions(fo *redis.FailoverOptions) (*redis.Options, error) {
	var errs []error
	for _, s := range fo.SentinelAddrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: s, Username: fo.SentinelUsername, Password: fo.SentinelPassword, TLSConfig: fo.TLSConfig})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		addr, err := c.GetMasterAddrByName(ctx, fo.MasterName).Result()
		cancel()
		c.Close()
		if err == nil {
			return &redis.Options{Addr: net.JoinHostPort(addr[0], addr[1]), DB: fo.DB, Username: fo.Username, Password: fo.Password, TLSConfig: fo.TLSConfig}, nil
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %w", s, err))
	}
	return nil, fmt.Errorf("no Sentinel names the primary %q: %w", fo.MasterName, errors.Join(errs...))
}

// OpenFailover is the client of the primary the Sentinels name: it asks
// them again when the primary stops answering or they announce a
// failover, so every process follows a promotion on its own.
func OpenFailover(fo *redis.FailoverOptions) *redis.Client {
	fo.PoolSize = 256
	fo.MinIdleConns = 8
	return redis.NewFailoverClient(fo)
}

// Sentinels are the Sentinels that monitor a primary, as a Sentinel URL
// names them: what redisack's fence asks.
type Sentinels struct {
	Master string
	Addrs  []string
	// Options are the Sentinels' connection options (credentials, TLS);
	// Addr is left empty.
	Options redis.Options
}

// SentinelsOf returns the Sentinels of a Sentinel URL; ok is false for any
// other address.
func SentinelsOf(addr string) (Sentinels, bool, error) {
	fo, ok, err := failoverOptions(addr)
	if !ok || err != nil {
		if err != nil {
			err = addrError(addr, err)
		}
		return Sentinels{}, ok, err
	}
	return Sentinels{Master: fo.MasterName, Addrs: fo.SentinelAddrs,
		Options: redis.Options{Username: fo.SentinelUsername, Password: fo.SentinelPassword, TLSConfig: fo.TLSConfig}}, true, nil
}
