// Package orderid mints seckill's order ids: 64-bit, time-ordered and unique
// across api instances without a round trip per id.
//
// Layout (most significant first): 1 unused sign bit, 41 bits of
// milliseconds since 2025-01-01 UTC (good for 69 years), 10 bits of node id,
// 12 bits of per-millisecond sequence. The node id is leased from Redis (see
// LeaseNode), so two live instances never share one.
package orderid

import (
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

// Generator mints ids for one node. It is safe for concurrent use.
type Generator struct {
	node int64
	now  func() time.Time

	mu     sync.Mutex
	lastMs int64
	seq    int64
}

// New returns a generator for node (0 ≤ node < MaxNodes).
func New(node int) *Generator {
	if node < 0 || node >= MaxNodes {
		panic("orderid: node out of range")
	}
	return &Generator{node: int64(node), now: time.Now}
}

// Next returns a new id, greater than every id this generator returned
// before. If the wall clock steps back, it keeps counting from the last
// millisecond it used instead of repeating ids.
func (g *Generator) Next() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := g.now().UnixMilli() - epoch
	if ms <= g.lastMs {
		ms = g.lastMs
		g.seq++
		if g.seq > maxSeq {
			// 4096 ids in one millisecond: borrow the next millisecond.
			ms++
			g.seq = 0
		}
	} else {
		g.seq = 0
	}
	g.lastMs = ms
	return ms<<(nodeBits+seqBits) | g.node<<seqBits | g.seq
}

// Time returns when id was minted (to the millisecond).
func Time(id int64) time.Time {
	return time.UnixMilli(id>>(nodeBits+seqBits) + epoch).UTC()
}

// Node returns the node that minted id.
func Node(id int64) int { return int(id >> seqBits & (MaxNodes - 1)) }
