package relay

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/stock"
)

// stream is the reader's view of one live sale's intent stream.
type stream struct {
	sale int64
	key  string
	// grouped: the consumer group exists, as far as the reader knows. A
	// stream joins the reads only then.
	grouped bool
	// ownPending: entries delivered to this consumer and not acknowledged
	// may be waiting (a restart under the same name, or starts that
	// failed). They are read ("0") and started before the stream's new
	// entries, not before retryAt; only the fence lets new ones be read
	// meanwhile.
	ownPending bool
	// fenced: the last try of its own pending entries, or of new ones,
	// failed because the fence stopped their acknowledgement. Its new
	// entries are read all the same, and recorded (readNew). Read only
	// while ownPending holds.
	fenced  bool
	retryAt time.Time
	backoff *backoff
	// claimFrom is where the next XAUTOCLAIM of the stream goes on.
	claimFrom string
}

// reader is the state of Run's loop; only Run's goroutine touches it.
// Every Redis call it makes is sequential, so the relay holds at most one
// Redis connection at a time, whatever the number of sales.
type reader struct {
	r       *Relay
	live    []*stream          // by sale id
	byKey   map[string]*stream // the same, by stream key
	listed  time.Time          // last listing of the live sales
	stale   bool               // list again before reading: a stream lost its group
	claimed time.Time          // last XAUTOCLAIM round
	turn    int                // the chunk of live streams the next blocking read names
	errs    *backoff           // pause after a failed Redis call
	// conn is the reader's own connection (see redis), and closeConn
	// gives it back; nil until the first call, and after one failed.
	conn      redis.Cmdable
	closeConn func() error
}

// redis is the connection every call of the reader goes on: one
// connection, to one server, held across a read and the acknowledgement
// of what it read (ack), so that the WAIT answers for the server the
// intents came from and no other (docs/design.md §3.13). A call that fails
// on it (not a Redis error reply) drops it; the next call takes a new
// connection, and what was read on the old one stays pending, to be read
// again. A Redis Cluster client has no single connection (§3.12): its
// calls go on the client.
func (rd *reader) redis() redis.Cmdable {
	if rd.conn == nil {
		rd.conn, rd.closeConn, _ = rd.r.stock.LendConn()
	}
	return rd.conn
}

// check drops the reader's connection if err says it is broken: any
// error but a Redis error reply.
func (rd *reader) check(err error) {
	var reply redis.Error
	if err == nil || errors.As(err, &reply) {
		return
	}
	rd.drop()
}

// ack waits for the replicas on the connection the batches being started
// were read on; if that connection was dropped since, the batches are not
// acknowledged (they stay pending).
func (rd *reader) ack(ctx context.Context) error {
	if rd.conn == nil {
		return errors.New("the connection the intents were read on is lost")
	}
	err := rd.r.stock.AwaitReplicasOn(ctx, rd.conn)
	rd.check(err)
	return err
}

// drop gives the reader's connection back; the next call takes a new one.
func (rd *reader) drop() {
	if rd.conn != nil {
		_ = rd.closeConn()
		rd.conn, rd.closeConn = nil, nil
	}
}

// claimCalls bounds the XAUTOCLAIMs of one stream in one round; the cursor
// carries the rest of the pending list to the next round.
const claimCalls = 8

// Run reads the intent streams of the live sales and starts their
// workflows until ctx ends, and takes part in engine probes (probe.go:
// a RPOP every half second, no connection held). It returns ctx's error.
func (r *Relay) Run(ctx context.Context) error {
	if ps, ok := r.starter.(ProbeStarter); ok {
		// The engine probe's starts go out where the orders' do (probe.go).
		var probes sync.WaitGroup
		defer probes.Wait()
		probes.Go(func() { r.probeLoop(ctx, ps) })
	}
	rd := &reader{r: r, byKey: map[string]*stream{}, errs: newBackoff()}
	defer rd.drop()
	defer r.liveSales.Store(0)
	for ctx.Err() == nil {
		if rd.stale || time.Since(rd.listed) >= r.opts.Discover {
			if err := rd.list(ctx); err != nil {
				if ctx.Err() == nil {
					r.opts.Logger.Warn("relay: list live sales", "err", err)
					rd.errs.wait(ctx)
				}
				continue
			}
		}
		if rd.readOwn(ctx) {
			continue // go on with them until none is left
		}
		if time.Since(rd.claimed) >= r.opts.MinIdle/2 {
			rd.claimed = time.Now()
			rd.claim(ctx)
		}
		rd.readNew(ctx)
	}
	return ctx.Err()
}

// list refreshes the live streams and creates the consumer group of those
// that join. A stream whose group could not be created is left out of the
// reads until the next listing.
func (rd *reader) list(ctx context.Context) error {
	ids, err := rd.r.stock.LiveSales(ctx)
	if err != nil {
		return err
	}
	live := make([]*stream, 0, len(ids))
	byKey := make(map[string]*stream, len(ids))
	for _, id := range ids {
		key := stock.KeysFor(id).Intents
		s := rd.byKey[key]
		if s == nil {
			s = &stream{sale: id, key: key, ownPending: true, backoff: newBackoff(), claimFrom: "0-0"}
		}
		live = append(live, s)
		byKey[key] = s
	}
	rd.live, rd.byKey = live, byKey
	rd.listed, rd.stale = time.Now(), false
	rd.r.liveSales.Store(int64(len(live)))
	rd.createGroups(ctx)
	return nil
}

// createGroups creates, in one round trip, the consumer group of every
// live stream not known to have it (MKSTREAM: a sale's stream appears with
// its first intent). The group starts at "0", so intents written before it
// existed are read too.
func (rd *reader) createGroups(ctx context.Context) {
	var missing []*stream
	for _, s := range rd.live {
		if !s.grouped {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return
	}
	pipe := rd.redis().Pipeline()
	cmds := make([]*redis.StatusCmd, len(missing))
	for i, s := range missing {
		cmds[i] = pipe.XGroupCreateMkStream(ctx, s.key, rd.r.opts.Group, "0")
	}
	_, err := pipe.Exec(ctx) // each command's error is looked at below
	rd.check(err)
	for i, s := range missing {
		err := cmds[i].Err()
		if err == nil || isRedisErr(err, "BUSYGROUP") {
			s.grouped = true
			s.ownPending = true
			continue
		}
		if ctx.Err() == nil {
			rd.r.opts.Logger.Warn("relay: create consumer group", "sale_id", s.sale, "err", err)
		}
	}
}

// readOwn reads the entries delivered to this consumer and not yet
// acknowledged, of the streams that may have some and are due, and starts
// their workflows. It reports whether it read any.
func (rd *reader) readOwn(ctx context.Context) bool {
	now := time.Now()
	var due []*stream
	for _, s := range rd.live {
		if s.grouped && s.ownPending && !now.Before(s.retryAt) {
			due = append(due, s)
		}
	}
	readAny := false
	for chunk := range slices.Chunk(due, rd.r.opts.StreamsPerRead) {
		res, err := rd.read(ctx, chunk, "0", -1)
		if err != nil {
			rd.failed(ctx, "read own pending intents", err)
			return readAny
		}
		got := make(map[string][]redis.XMessage, len(res))
		for _, x := range res {
			got[x.Stream] = x.Messages
		}
		var batches []batch
		for _, s := range chunk {
			if msgs := got[s.key]; len(msgs) > 0 {
				batches = append(batches, batch{s, msgs})
			} else {
				s.ownPending = false
			}
		}
		if len(batches) > 0 {
			readAny = true
			rd.start(ctx, batches)
		}
	}
	return readAny
}

// readNew waits for new entries on the live streams whose own pending
// entries are done, or wait for the fence, and starts their workflows (a
// fenced stream's go to Fenced). One read at a time: with
// more live streams than StreamsPerRead, the chunks take turns, each
// waiting its share of Block, so every stream is looked at within about
// Block.
func (rd *reader) readNew(ctx context.Context) {
	o := rd.r.opts
	block := o.Block
	now := time.Now()
	var ready []*stream
	for _, s := range rd.live {
		if !s.grouped {
			continue
		}
		if s.ownPending {
			// Not before its retry is due; wake up for it.
			block = max(min(block, s.retryAt.Sub(now)), time.Millisecond)
			if !s.fenced {
				continue
			}
			// Its own entries wait for the fence to open again, but its
			// new ones are read meanwhile, and handed to Fenced (if set)
			// like them: a purchase the fence let through just before it
			// closed may have written its intent after the last read,
			// and the old primary's demotion discards whatever no
			// process has recorded (docs/design.md §3.14).
		}
		ready = append(ready, s)
	}
	if len(ready) == 0 {
		rd.r.streamsRead.Store(0)
		sleep(ctx, block) // nothing to read until the next listing or retry
		return
	}
	chunks := (len(ready) + o.StreamsPerRead - 1) / o.StreamsPerRead
	rd.turn %= chunks
	chunk := ready[rd.turn*o.StreamsPerRead : min(len(ready), (rd.turn+1)*o.StreamsPerRead)]
	rd.turn++
	// BLOCK 0 would wait forever: a block is at least a millisecond.
	block = max(block/time.Duration(chunks), time.Millisecond)
	// Yield before reading: entries left unread are nobody's, so holding
	// back never ages them towards another relay's claim.
	rd.r.yield(ctx)
	res, err := rd.read(ctx, chunk, ">", block)
	if err != nil {
		rd.failed(ctx, "read intents", err)
		return
	}
	var batches []batch
	for _, x := range res {
		if s := rd.byKey[x.Stream]; s != nil && len(x.Messages) > 0 {
			batches = append(batches, batch{s, x.Messages})
		}
	}
	rd.start(ctx, batches)
}

// read runs one XREADGROUP over streams from id: "0" for this consumer's
// pending entries, ">" for new ones. block < 0 does not block.
func (rd *reader) read(ctx context.Context, streams []*stream, id string, block time.Duration) ([]redis.XStream, error) {
	o := rd.r.opts
	args := make([]string, 0, 2*len(streams))
	for _, s := range streams {
		args = append(args, s.key)
	}
	for range streams {
		args = append(args, id)
	}
	rd.r.streamsRead.Store(int64(len(streams)))
	if block >= 0 {
		rd.r.blockingReads.Add(1)
		defer rd.r.blockingReads.Add(-1)
	}
	res, err := rd.redis().XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: o.Group, Consumer: o.Consumer, Streams: args, Count: int64(o.Batch), Block: block,
	}).Result()
	rd.check(err)
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	if err == nil {
		rd.errs.reset()
	}
	if isRedisErr(err, "NOGROUP") {
		// One of them was lost (a Redis restart without persistence, or a
		// sale retired meanwhile). Rather than parse which from the
		// message, list the live sales again and recreate the groups of
		// those still live (BUSYGROUP for the others).
		for _, s := range streams {
			s.grouped = false
		}
		rd.stale = true
	}
	return res, err
}

// claim takes over the entries of the live streams that a relay read and
// left unacknowledged for MinIdle (it crashed). XAUTOCLAIM looks at no more
// than 10×Count pending entries per call and returns where it stopped; the
// reader follows that cursor, for a few calls in a round and across
// rounds, so a head of entries not idle yet does not hide those behind it.
// Each call of a round is one pipeline over the streams.
func (rd *reader) claim(ctx context.Context) {
	o := rd.r.opts
	var todo []*stream
	for _, s := range rd.live {
		if s.grouped {
			todo = append(todo, s)
		}
	}
	for range claimCalls {
		if len(todo) == 0 || ctx.Err() != nil {
			return
		}
		pipe := rd.redis().Pipeline()
		cmds := make([]*redis.XAutoClaimCmd, len(todo))
		for i, s := range todo {
			cmds[i] = pipe.XAutoClaim(ctx, &redis.XAutoClaimArgs{
				Stream: s.key, Group: o.Group, Consumer: o.Consumer,
				MinIdle: o.MinIdle, Start: s.claimFrom, Count: int64(o.Batch),
			})
		}
		_, err := pipe.Exec(ctx) // each command's error is looked at below
		rd.check(err)
		var (
			batches []batch
			more    []*stream
		)
		for i, s := range todo {
			msgs, next, err := cmds[i].Result()
			switch {
			case isRedisErr(err, "NOGROUP"):
				s.grouped, rd.stale = false, true
				continue
			case err != nil:
				if ctx.Err() == nil {
					o.Logger.Warn("relay: reclaim intents", "sale_id", s.sale, "err", err)
				}
				continue
			}
			if len(msgs) > 0 {
				o.Logger.Info("relay: reclaimed intents of another relay", "sale_id", s.sale, "count", len(msgs))
				batches = append(batches, batch{s, msgs})
			}
			if next == "" || next == "0-0" {
				s.claimFrom = "0-0" // the whole pending list was looked at
				continue
			}
			s.claimFrom = next
			more = append(more, s)
		}
		rd.start(ctx, batches)
		todo = more
	}
}

// start starts the batches' workflows. A stream with failed starts keeps
// them pending and retries them from its own pending entries after a
// pause: Temporal may be down, and they must not be lost.
func (rd *reader) start(ctx context.Context, batches []batch) {
	if len(batches) == 0 {
		return
	}
	failed, fenced := rd.r.process(ctx, batches, rd.ack)
	for i, b := range batches {
		if failed[i] > 0 {
			b.s.ownPending, b.s.fenced = true, fenced
			b.s.retryAt = time.Now().Add(b.s.backoff.next())
		} else {
			// A batch with nothing to start (malformed entries only) in
			// a fenced round says nothing of the fence: the flag stays.
			if !fenced {
				b.s.fenced = false
			}
			b.s.backoff.reset()
		}
	}
}

// failed reports a failed read and pauses before the next; a lost group
// is recreated at once instead.
func (rd *reader) failed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil || rd.stale {
		return
	}
	rd.r.opts.Logger.Warn("relay: "+what, "err", err)
	rd.errs.wait(ctx)
}

// isRedisErr reports whether err is a Redis error reply of the given kind,
// its first word: NOGROUP, BUSYGROUP and the like.
func isRedisErr(err error, kind string) bool { return redis.HasErrorPrefix(err, kind) }
