// Package fault names the places where an order's paths write to Redis,
// Postgres or Temporal (docs/reliability.md, "Fault points") and lets a test
// or an operator's drill inject a failure right after such a write: an
// error, as if the write had timed out after it was applied, or a crash of
// the component, as if the process had died between that write and the
// next.
//
// Nothing is armed in normal operation: Hit is one atomic load. Tests arm
// points with Arm; a binary arms them from SECKILL_FAULTS (see FromEnv),
// which the chaos suite uses to kill real processes at a point.
package fault

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Point names one write of one path.
type Point string

// ErrInjected is the error an armed point returns.
var ErrInjected = errors.New("injected fault")

// Action is what an armed point does when a path reaches it. It returns
// the error Hit returns (nil: go on); it may also not return at all (a
// crash).
type Action func(p Point) error

var (
	armed   atomic.Bool // any point armed: the only cost when none is
	mu      sync.Mutex
	actions = map[Point]Action{}
	hits    = map[Point]int{}
)

// Hit is called by a path right after the write p names succeeded. With p
// unarmed it returns nil; armed, it does what the point's Action says.
func Hit(p Point) error {
	if !armed.Load() {
		return nil
	}
	mu.Lock()
	a := actions[p]
	hits[p]++
	mu.Unlock()
	if a == nil {
		return nil
	}
	return a(p)
}

// Arm makes p do a from now on, and returns the function that disarms it.
// Points are process-wide: a test that arms one must not run in parallel
// with another test that passes through the same point.
func Arm(p Point, a Action) (disarm func()) {
	if _, ok := lookup(p); !ok {
		panic(fmt.Sprintf("fault: %q is not a registered point", p))
	}
	mu.Lock()
	actions[p] = a
	armed.Store(true)
	mu.Unlock()
	return func() {
		mu.Lock()
		delete(actions, p)
		armed.Store(len(actions) > 0)
		mu.Unlock()
	}
}

// Hits returns how often p was reached while any point was armed.
func Hits(p Point) int {
	mu.Lock()
	defer mu.Unlock()
	return hits[p]
}

// Fail returns ErrInjected the first n times the point is reached, then
// lets the path go on: the write was applied, its caller was told it failed.
func Fail(n int) Action {
	var left atomic.Int64
	left.Store(int64(n))
	return func(p Point) error {
		if left.Add(-1) >= 0 {
			return fmt.Errorf("%w at %s", ErrInjected, p)
		}
		return nil
	}
}

// Stop ends the goroutine that reached the point, the first n times, as a
// crash of the component would end it there: nothing after the point runs
// in it. Deferred calls still run (runtime.Goexit), which a real crash
// would skip; the chaos suite kills real processes at points for that
// (FromEnv). stopped, if not nil, is closed when it first stops one.
func Stop(n int, stopped chan<- struct{}) Action {
	var left atomic.Int64
	left.Store(int64(n))
	var once sync.Once
	return func(Point) error {
		if left.Add(-1) < 0 {
			return nil
		}
		if stopped != nil {
			once.Do(func() { close(stopped) })
		}
		runtime.Goexit()
		return nil
	}
}

// Exit ends the process at the point with status 70, as a SIGKILL there
// would, without running deferred calls or shutdown hooks.
func Exit(p Point) error {
	fmt.Fprintf(os.Stderr, "fault: exiting at %s (SECKILL_FAULTS)\n", p)
	os.Exit(70)
	return nil
}

// FromEnv arms the points listed in SECKILL_FAULTS, a comma-separated list
// of point=exit, point=error (error: every time) or point=error:N (an error
// the first N times, then the path goes on, as a write that timed out once
// and then answers; the browser test's buyer retries through one). It is
// for drills and the chaos suite's real kills, never for production; the
// binary logs every point it arms. It returns the points armed.
func FromEnv() ([]Point, error) {
	spec := os.Getenv("SECKILL_FAULTS")
	if spec == "" {
		return nil, nil
	}
	var out []Point
	for _, item := range strings.Split(spec, ",") {
		name, mode, _ := strings.Cut(strings.TrimSpace(item), "=")
		p := Point(name)
		if _, ok := lookup(p); !ok {
			return out, fmt.Errorf("SECKILL_FAULTS: unknown point %q", name)
		}
		switch mode, times, counted := strings.Cut(mode, ":"); {
		case mode == "exit" && !counted:
			Arm(p, Exit)
		case mode == "error" && !counted:
			Arm(p, Fail(1<<62))
		case mode == "error":
			n, err := strconv.Atoi(times)
			if err != nil || n < 1 {
				return out, fmt.Errorf("SECKILL_FAULTS: %q: error:N needs a count N of 1 or more", item)
			}
			Arm(p, Fail(n))
		default:
			return out, fmt.Errorf("SECKILL_FAULTS: %q: mode must be exit, error or error:N", item)
		}
		out = append(out, p)
	}
	return out, nil
}
