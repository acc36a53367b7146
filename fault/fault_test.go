package fault

import (
	"errors"
	"testing"
)

// disarmAll undoes FromEnv, which returns no disarm functions: a binary
// keeps its points for its whole life.
func disarmAll(t *testing.T) {
	t.Cleanup(func() {
		mu.Lock()
		clear(actions)
		armed.Store(false)
		mu.Unlock()
	})
}

// error:N fails the first N hits and lets every later one through, so a
// test can make one purchase fail after its write and watch the retry.
func TestFromEnvErrorCount(t *testing.T) {
	disarmAll(t)
	t.Setenv("SECKILL_FAULTS", "purchase.reserve=error:2, relay.ack=error")
	points, err := FromEnv()
	if err != nil || len(points) != 2 || points[0] != PurchaseReserve || points[1] != RelayAck {
		t.Fatalf("FromEnv: %v %v", points, err)
	}
	for i, want := range []bool{true, true, false, false} {
		if err := Hit(PurchaseReserve); errors.Is(err, ErrInjected) != want {
			t.Errorf("hit %d of purchase.reserve: %v, want failing %v", i+1, err, want)
		}
	}
	for i := range 3 {
		if err := Hit(RelayAck); !errors.Is(err, ErrInjected) {
			t.Errorf("hit %d of relay.ack (error, every time): %v", i+1, err)
		}
	}
}

func TestFromEnvRefusesBadModes(t *testing.T) {
	disarmAll(t)
	for _, spec := range []string{
		"purchase.reserve=error:0",
		"purchase.reserve=error:-1",
		"purchase.reserve=error:x",
		"purchase.reserve=error:",
		"purchase.reserve=exit:1",
		"purchase.reserve=fail",
		"purchase.nope=error:1",
	} {
		t.Setenv("SECKILL_FAULTS", spec)
		if _, err := FromEnv(); err == nil {
			t.Errorf("SECKILL_FAULTS=%s was accepted", spec)
		}
	}
}
