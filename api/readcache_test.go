package api

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/domain"
)

// Readers missing at once share one load; a reader that gives up does not
// fail the others; a forget during a load keeps its answer out of the
// copy and out of later readers' hands.
func TestReadCacheSharesLoadsAndForgets(t *testing.T) {
	var loads atomic.Int64
	started := make(chan struct{}, 16)
	finish := make(chan struct{}) // one send lets one load finish
	c := newReadCache(time.Minute, func(ctx context.Context, id int64) (int64, error) {
		n := loads.Add(1)
		started <- struct{}{}
		<-finish
		return n, nil
	}, nil)
	ctx := context.Background()
	joined := make(chan struct{}, 16)
	c.joined = func() { joined <- struct{}{} }

	impatient, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error)
	go func() { _, err := c.get(impatient, 7); gaveUp <- err }()
	<-started // the impatient reader's miss started the load
	var wg sync.WaitGroup
	got := make([]int64, 7)
	for i := range got {
		wg.Go(func() {
			v, err := c.get(ctx, 7)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	for range 1 + len(got) { // every reader waits on the one load before it ends
		<-joined
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the reader that gave up: %v", err)
	}
	finish <- struct{}{}
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Fatalf("8 readers missing at once made %d loads, want 1", n)
	}
	for i, v := range got {
		if v != 1 {
			t.Fatalf("reader %d read %d, want the shared load's 1", i, v)
		}
	}

	// A forget while a load is under way: that load's answer is not kept,
	// and a reader after the forget does not join it.
	c.forget(7)
	early := make(chan int64)
	go func() { v, _ := c.get(ctx, 7); early <- v }()
	<-started
	c.forget(7)
	late := make(chan int64)
	go func() { v, _ := c.get(ctx, 7); late <- v }()
	<-started // the late reader started a load of its own
	finish <- struct{}{}
	finish <- struct{}{}
	if e, l := <-early, <-late; e != 2 || l != 3 {
		t.Fatalf("early reader %d, late reader %d: want loads 2 and 3", e, l)
	}
	if v, _ := c.get(ctx, 7); v != 3 || loads.Load() != 3 {
		t.Fatalf("kept %d after %d loads, want the late reader's 3", v, loads.Load())
	}
}

// An unknown sale is remembered as unknown; other errors are not kept;
// the copy never grows past its bound.
func TestReadCacheKeepsUnknownAndStaysBounded(t *testing.T) {
	var loads atomic.Int64
	fail := errors.New("database down")
	c := newReadCache(time.Minute, func(ctx context.Context, id int64) (int64, error) {
		loads.Add(1)
		switch id {
		case -1:
			return 0, domain.ErrUnknownSale
		case -2:
			return 0, fail
		}
		return id, nil
	}, func(err error) bool { return errors.Is(err, domain.ErrUnknownSale) })
	ctx := context.Background()
	for range 3 {
		if _, err := c.get(ctx, -1); !errors.Is(err, domain.ErrUnknownSale) {
			t.Fatal(err)
		}
		if _, err := c.get(ctx, -2); !errors.Is(err, fail) {
			t.Fatal(err)
		}
	}
	if n := loads.Load(); n != 1+3 {
		t.Fatalf("%d loads, want 1 for the unknown sale and 3 for the failing one", n)
	}
	for id := range int64(maxCachedSales + 100) {
		if v, err := c.get(ctx, id); err != nil || v != id {
			t.Fatalf("sale %d: %d %v", id, v, err)
		}
	}
	c.mu.Lock()
	n := len(c.entries)
	c.mu.Unlock()
	if n > maxCachedSales {
		t.Fatalf("the copy holds %d sales, bound %d", n, maxCachedSales)
	}
}
