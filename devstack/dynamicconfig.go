package devstack

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
)

// dynamicConfigPoll is how often a dynamic-config file is read again: a
// change (a frontend rate limit during a sale) applies without a restart.
const dynamicConfigPoll = 10 * time.Second

// layered is a dynamic-config file, in the server's own format, over
// seckill's values (TemporalOptions.DynamicConfig): the file's values of a
// key come first, so they win where their constraints match (the server
// takes the most specific match, the first among equals), and seckill's
// stay the fallback, for the task queues a constrained value of the file
// does not name, say. Anything neither sets is the server's default.
type layered struct {
	*dynamicconfig.FileBasedClient
	base dynamicconfig.StaticClient
}

// GetValue is read on the server's hot paths (settings are looked up per
// call): it allocates only for a key both layers set.
func (l layered) GetValue(key dynamicconfig.Key) []dynamicconfig.ConstrainedValue {
	file, base := l.FileBasedClient.GetValue(key), l.base.GetValue(key)
	switch {
	case len(base) == 0:
		return file
	case len(file) == 0:
		return base
	}
	return append(slices.Clip(file), base...) // a new array: the file client's is shared
}

// Subscribe passes on the file's changes as the layered values: a key
// the file no longer sets falls back to seckill's value, not the
// server's default.
func (l layered) Subscribe(f dynamicconfig.ClientUpdateFunc) (cancel func()) {
	return l.FileBasedClient.Subscribe(func(changed map[dynamicconfig.Key][]dynamicconfig.ConstrainedValue) {
		merged := make(map[dynamicconfig.Key][]dynamicconfig.ConstrainedValue, len(changed))
		for k := range changed {
			merged[k] = l.GetValue(k)
		}
		f(merged)
	})
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
	// The server takes a misspelt key or a value of the wrong type as a
	// warning and goes on without it; at start it is a mistake to say.
	if lr := dynamicconfig.LoadYamlFile(b); len(lr.Errors)+len(lr.Warnings) > 0 {
		return nil, fmt.Errorf("devstack: dynamic config %s: %w", opts.DynamicConfigFile, errors.Join(append(lr.Errors, lr.Warnings...)...))
	}
	fc, err := dynamicconfig.NewFileBasedClient(&dynamicconfig.FileBasedClientConfig{
		Filepath: opts.DynamicConfigFile, PollInterval: dynamicConfigPoll,
	}, logger, done)
	if err != nil {
		return nil, fmt.Errorf("devstack: dynamic config: %w", err)
	}
	return layered{FileBasedClient: fc, base: base}, nil
}
