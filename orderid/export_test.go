package orderid

import "time"

// Hooks for the external tests (orderid_test), which need the test services
// (internal/testenv imports store, which imports this package).

// SetClock makes g read the time from now.
func SetClock(g *Generator, now func() time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now = now
}

// NodeKey is the Redis key of a node's lease.
func NodeKey(node int) string { return nodeKey(node) }

// FloorKey is the Redis key of a node's floor.
func FloorKey(node int) string { return floorKey(node) }
