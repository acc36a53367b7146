// Package orderid mints seckill's order ids: 64-bit, time-ordered and unique
// across api instances without a round trip per id.
//
// Layout (most significant first): 1 unused sign bit, 41 bits of
// milliseconds since 2025-01-01 UTC (good for 69 years), 10 bits of node id,
// 12 bits of per-millisecond sequence. The node id is leased from Redis (see
// LeaseNode), so two live instances never share one.
package orderid

import (
	"errors"
	"math"
	"sync"
	"time"
)

const (
	nodeBits = 10
	seqBits  = 12
	// MaxNodes is how many api instances can mint ids at the same time.
	MaxNodes = 1 << nodeBits
	maxSeq   = 1<<seqBits - 1
)

// epoch is 2025-01-01T00:00:00Z in Unix milliseconds.
const epoch int64 = 1735689600000

// Epoch and TimeShift read an id's time where Time cannot run (SQL): the
// Unix millisecond id>>TimeShift + Epoch.
const (
	Epoch     = epoch
	TimeShift = nodeBits + seqBits
)

// ErrUnfenced is returned by Next when the generator's node lease is not
// confirmed for the current time: minting now could repeat an id that the
// node's next holder mints. Nothing was minted; the caller answers 503.
var ErrUnfenced = errors.New("orderid: node lease not confirmed; not minting")

// Generator mints ids for one node. It is safe for concurrent use.
type Generator struct {
	node  int64
	lease *Lease // nil: the node is the caller's to guarantee (tests, one process)
	now   func() time.Time

	mu       sync.Mutex
	lastNode int64
	lastMs   int64
	seq      int64
}

// New returns a generator for node (0 ≤ node < MaxNodes) that trusts the
// caller to be the node's only user.
func New(node int) *Generator {
	if node < 0 || node >= MaxNodes {
		panic("orderid: node out of range")
	}
	return &Generator{node: int64(node), now: time.Now}
}

// Leased returns a generator that mints under lease's node, and only for
// milliseconds the lease is confirmed to cover.
//
// That is the fence: a node's next holder can only take it after the key
// expired in Redis, which is after the time up to which this process last
// confirmed it, so the two never mint in the same millisecond. After a
// pause longer than the lease (a stopped VM, a long GC), Next refuses
// until a renewal confirms the node again, or the lease moves to a new
// node.
func Leased(lease *Lease) *Generator {
	return &Generator{lease: lease, now: time.Now}
}

// Next returns a new id, greater than every id this generator returned
// before, or ErrUnfenced. If the wall clock steps back, it keeps counting
// from the last millisecond it used instead of repeating ids.
func (g *Generator) Next() (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	node, until, floor := g.node, int64(math.MaxInt64), int64(0)
	if g.lease != nil {
		n, u, f := g.lease.confirmed()
		node, until, floor = int64(n), u, f
	}
	if node != g.lastNode {
		// Another node: its earlier holders' ids, not this generator's,
		// are the ones to stay above.
		g.lastNode, g.lastMs, g.seq = node, 0, 0
	}
	ms, seq := max(g.now().UnixMilli(), floor)-epoch, int64(0)
	if ms <= g.lastMs {
		ms, seq = g.lastMs, g.seq+1
		if seq > maxSeq {
			// 4096 ids in one millisecond: borrow the next millisecond.
			ms, seq = ms+1, 0
		}
	}
	if ms+epoch >= until {
		return 0, ErrUnfenced
	}
	g.lastMs, g.seq = ms, seq
	return ms<<(nodeBits+seqBits) | node<<seqBits | seq, nil
}

// Time returns when id was minted (to the millisecond).
func Time(id int64) time.Time {
	return time.UnixMilli(id>>(nodeBits+seqBits) + epoch).UTC()
}

// Node returns the node that minted id.
func Node(id int64) int { return int(id >> seqBits & (MaxNodes - 1)) }

// FirstAt returns the smallest id minted at or after t (to the
// millisecond). Ids compare like the times they were minted, so the orders
// admitted in a window of time are a range of ids: [FirstAt(from),
// FirstAt(to)).
func FirstAt(t time.Time) int64 {
	ms := t.UnixMilli() - epoch
	switch {
	case ms <= 0:
		return 0
	case ms >= 1<<(63-nodeBits-seqBits):
		return math.MaxInt64
	}
	return ms << (nodeBits + seqBits)
}
