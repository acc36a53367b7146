package devstack

import (
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
)

// dynamicConfigPoll is how often a dynamic-config file is read again: a
// change (a frontend rate limit during a sale) applies without a restart.
const dynamicConfigPoll = 10 * time.Second

// layered is a dynamic-config file, in the server's own format, over
// seckill's values (TemporalOptions.DynamicConfig): a key the file sets is
// the file's, any other keeps seckill's value or the server's default.
type layered struct {
	*dynamicconfig.FileBasedClient
	base dynamicconfig.StaticClient
}

func (l layered) GetValue(key dynamicconfig.Key) []dynamicconfig.ConstrainedValue {
	if v := l.FileBasedClient.GetValue(key); len(v) > 0 {
		return v
	}
	return l.base.GetValue(key)
}

// dynamicConfig is the server's dynamic config: the static values of
// opts, under opts.DynamicConfigFile if set. The file is read once here so
// that a mistake in it is an error that says what is wrong, not a server
// that starts without it; done stops its polling.
func dynamicConfig(opts TemporalOptions, logger log.Logger, done <-chan any) (dynamicconfig.Client, error) {
	base := make(dynamicconfig.StaticClient, len(opts.DynamicConfig))
	for k, v := range opts.DynamicConfig {
		base[dynamicconfig.MakeKey(k)] = v
	}
	if opts.DynamicConfigFile == "" {
		return base, nil
	}
	b, err := os.ReadFile(opts.DynamicConfigFile)
	if err != nil {
		return nil, fmt.Errorf("devstack: dynamic config: %w", err)
	}
	if lr := dynamicconfig.LoadYamlFile(b); len(lr.Errors) > 0 {
		return nil, fmt.Errorf("devstack: dynamic config %s: %w", opts.DynamicConfigFile, errors.Join(lr.Errors...))
	}
	fc, err := dynamicconfig.NewFileBasedClient(&dynamicconfig.FileBasedClientConfig{
		Filepath: opts.DynamicConfigFile, PollInterval: dynamicConfigPoll,
	}, logger, done)
	if err != nil {
		return nil, fmt.Errorf("devstack: dynamic config: %w", err)
	}
	return layered{FileBasedClient: fc, base: base}, nil
}
