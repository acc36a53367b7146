package relay_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/relay"
)

// While purchases are in flight the relay starts nothing; once they stop,
// it starts every queued order.
func TestRelayYieldsToAdmission(t *testing.T) {
	st, _ := newStock(t)
	admit(t, st, 1, 20)
	var busy atomic.Bool
	busy.Store(true)
	asked := make(chan struct{}, 1)
	starter := &countingStarter{}
	r := relay.New(st, starter, relay.Options{Consumer: "yield", Discover: 10 * time.Millisecond,
		MaxYield: time.Hour, Busy: func() bool {
			select {
			case asked <- struct{}{}:
			default:
			}
			return busy.Load()
		}})
	run(t, r)
	// The relay keeps asking whether admission is still busy before it
	// reads the intents; nothing may have started yet.
	for range 3 {
		select {
		case <-asked:
		case <-time.After(10 * time.Second):
			t.Fatal("the relay never asked whether purchases are in flight")
		}
	}
	if n := starter.n.Load(); n != 0 {
		t.Fatalf("%d workflows started while purchases were in flight", n)
	}
	busy.Store(false)
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := starter.n.Load(); n != 20 {
			return errors.New("not every order started yet")
		}
		return nil
	})
}

// A load that never stops holds the starts back for MaxYield at most.
func TestRelayYieldIsBounded(t *testing.T) {
	st, _ := newStock(t)
	admit(t, st, 1, 20)
	starter := &countingStarter{}
	r := relay.New(st, starter, relay.Options{Consumer: "yield", Discover: 10 * time.Millisecond,
		MaxYield: 50 * time.Millisecond, Busy: func() bool { return true }})
	run(t, r)
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := starter.n.Load(); n != 20 {
			return errors.New("not every order started yet")
		}
		return nil
	})
}
