package relay_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/relay"
	"github.com/seckill/seckill/workflows"
)

// countingStarter accepts every start at once: the benchmark measures the
// relay's own cost (read, parse, acknowledge), not Temporal's.
type countingStarter struct{ n atomic.Int64 }

func (s *countingStarter) Start(context.Context, workflows.OrderInput) (bool, error) {
	s.n.Add(1)
	return true, nil
}

// BenchmarkRelay drains b.N intents from a sale's stream.
func BenchmarkRelay(b *testing.B) {
	st, _ := newStockB(b)
	admitB(b, st, 1, b.N)
	starter := &countingStarter{}
	r := relay.New(st, starter, relay.Options{Consumer: "bench", Discover: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	defer func() { cancel(); <-stopped }() // before the Redis client closes
	b.ResetTimer()
	go func() { _ = r.Run(ctx); close(stopped) }()
	for starter.n.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
}
