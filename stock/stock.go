// Package stock is seckill's admission filter in Redis: the atomic
// reservation script, its inverse, the sale warm-up, the intent stream keys,
// and the snapshot and repair scripts the reconciler works with. It is a
// leaf package: it knows nothing of Temporal or HTTP.
package stock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/fault"
	"github.com/seckill/seckill/redisack"
)

var (
	// admit.lua holds the admission checks; reserve.lua and lookup.lua
	// are its two endings, so a lookup answers what a reservation would.
	// A reservation checks the buyer's rate limit first (limit.lua).
	//go:embed admit.lua
	admitSrc string

	//go:embed limit.lua
	limitSrc string

	//go:embed reserve.lua
	reserveSrc string
	// A retry of the winning request rewrites its Idempotency-Key in
	// reserve.lua, so the acknowledgement that follows covers the
	// reservation it answers with (admit.lua); lookup.lua writes nothing.
	reserveScript = redis.NewScript("local rewrite_winner = true\n" + limitSrc + admitSrc + reserveSrc)

	//go:embed lookup.lua
	lookupSrc    string
	lookupScript = redis.NewScript("local rewrite_winner = false\n" + admitSrc + lookupSrc)

	//go:embed release.lua
	releaseSrc    string
	releaseScript = redis.NewScript(releaseSrc)

	//go:embed warm.lua
	warmSrc    string
	warmScript = redis.NewScript(warmSrc)

	//go:embed snapshot.lua
	snapshotSrc    string
	snapshotScript = redis.NewScript(snapshotSrc)

	//go:embed repair.lua
	repairSrc    string
	repairScript = redis.NewScript(repairSrc)
)

// Stock runs the sale scripts against one Redis (a single node or a cluster).
type Stock struct {
	rdb   redis.UniversalClient
	locks *redsync.Redsync
	ack   redisack.Policy
}

// New returns a Stock. locks is the redsync instance over the independent
// Redis nodes used for Redlock; it guards warm-up and reconciliation.
func New(rdb redis.UniversalClient, locks *redsync.Redsync) *Stock {
	return &Stock{rdb: rdb, locks: locks}
}

// Acknowledge makes every write that must survive a failover (admission,
// warm-up, the live-sales set, operator changes) wait for p's replicas
// (docs/design.md §3.13). Call it before the Stock is used.
func (s *Stock) Acknowledge(p redisack.Policy) { s.ack = p }

// replicatedKey is written by AwaitReplicas: a write of its own to wait for.
const replicatedKey = "seckill:replicated"

// AwaitReplicas returns once the acknowledgement policy's replicas hold
// every write Redis had taken when it was called (nil at once without a
// policy), or an error wrapping *redisack.NotAcknowledgedError. Redis
// replicates one ordered stream, so a write of its own that the replicas
// confirm confirms all before it, whichever connection made them: the
// relay calls it before it starts the workflows of intents it has read,
// so that an admission a failover may still lose never becomes an order.
func (s *Stock) AwaitReplicas(ctx context.Context) error { return s.AwaitReplicasOn(ctx, s.rdb) }

// AwaitReplicasOn is AwaitReplicas on c. Given a connection the caller
// holds (*redis.Conn), the wait answers for the one server that
// connection reaches: the relay reads intents and acknowledges them on one
// connection, so that a failover between the two cannot have a new
// primary, which never had those intents, confirm them. A connection that
// broke stays broken (go-redis does not redial a *redis.Conn), so the
// acknowledgement fails rather than ask another server.
func (s *Stock) AwaitReplicasOn(ctx context.Context, c redisack.Pipeliner) error {
	if !s.ack.On() {
		return nil
	}
	return s.ack.Exec(ctx, c, func(p redis.Pipeliner) { p.Incr(ctx, replicatedKey) })
}

// Acknowledged reports whether writes wait for replicas.
func (s *Stock) Acknowledged() bool { return s.ack.On() }

// Client is the Redis client the scripts run on.
func (s *Stock) Client() redis.UniversalClient { return s.rdb }

// LendConn lends one connection of the client, for calls that must all
// reach the one server it is connected to (a read and the WAIT that
// answers for it, docs/design.md §3.13), with the function that gives it
// back. A client with no single connection (Redis Cluster, §3.12) lends
// itself: single is false, and giving it back does nothing.
func (s *Stock) LendConn() (c redis.Cmdable, giveBack func() error, single bool) {
	if l, ok := s.rdb.(interface{ Conn() *redis.Conn }); ok {
		conn := l.Conn()
		return conn, conn.Close, true
	}
	return s.rdb, func() error { return nil }, false
}

// Reserve admits userID to sale saleID under the freshly minted orderID,
// with no rate limit and no trace context: Admit with only these fields.
func (s *Stock) Reserve(ctx context.Context, saleID int64, userID string, orderID int64, idemKey string) (int64, error) {
	// fault: the points are at the callers of the scripts (purchase.reserve).
	return s.Admit(ctx, Purchase{SaleID: saleID, UserID: userID, OrderID: orderID, IdempotencyKey: idemKey})
}

// Purchase is one buyer's request for a unit of a sale, as Admit takes it.
type Purchase struct {
	SaleID int64
	UserID string
	// OrderID is the freshly minted id the order gets if the buyer wins.
	OrderID int64
	// IdempotencyKey, if not empty, is the request's Idempotency-Key: a
	// retry with the key of the request that won gets that order back as
	// a success.
	IdempotencyKey string
	// Traceparent is the W3C trace context of the purchase, which the
	// intent carries to the relay so that the order's workflow joins the
	// purchase's trace; "" writes none.
	Traceparent string
	// BuyerRate bounds the buyer's purchase requests of this sale per
	// second (a burst of one second's worth), checked in the same script
	// run as the reservation (limit.lua); 0 or less: no limit.
	BuyerRate int
	// AdmittedAt is the admitting api's clock when it admits the buyer:
	// the intent carries it (to the millisecond) to the order's row, as
	// the order's admitted_at. Zero writes none.
	AdmittedAt time.Time
}

// Admit runs one purchase in one script run: the buyer's rate limit, the
// admission checks, the reservation. It returns the order id that holds
// the buyer's unit (the minted one, or the first one for a retry of the
// winning request), or one of *domain.RateLimitedError (nothing was
// read or written), domain.ErrSoldOut, ErrNotStarted, ErrEnded,
// ErrUnknownSale (not warmed), *domain.AlreadyPurchasedError, or a
// wrapped Redis error. With an acknowledgement policy, an admission that
// replicas did not confirm returns its order id with an error wrapping
// *redisack.NotAcknowledgedError: the buyer may or may not hold the unit
// after a failover. So do "already purchased" (its order id, with
// ErrHeldUnconfirmed) and "sold out" (ErrSoldOutUnconfirmed): each is an
// answer only once a replica holds the state it reports.
func (s *Stock) Admit(ctx context.Context, p Purchase) (int64, error) {
	rate, admitted := "", ""
	if p.BuyerRate > 0 {
		rate = strconv.Itoa(p.BuyerRate)
	}
	if !p.AdmittedAt.IsZero() {
		admitted = strconv.FormatInt(p.AdmittedAt.UnixMilli(), 10)
	}
	k := KeysFor(p.SaleID)
	// fault: purchase.reserve, at the caller.
	cmd, err := s.ack.Run(ctx, s.rdb, reserveScript, append(k.admit(), RateKey(p.SaleID, p.UserID), k.Admitted),
		p.UserID, strconv.FormatInt(p.OrderID, 10), p.IdempotencyKey, p.Traceparent, rate, admitted)
	if redisack.IsNotAcknowledged(err) {
		res, rerr := cmd.Slice()
		_, id, aerr := admission("reserve", res, rerr)
		var already *domain.AlreadyPurchasedError
		switch {
		case aerr == nil:
			return id, fmt.Errorf("reserve: %w", err)
		case errors.As(aerr, &already):
			// The order the buyer holds may itself be one no replica has:
			// the refusal names it only once confirmed (admit.lua).
			return already.OrderID, fmt.Errorf("reserve: %w (order %d), and %w", ErrHeldUnconfirmed, already.OrderID, err)
		case errors.Is(aerr, domain.ErrSoldOut):
			return 0, fmt.Errorf("reserve: %w, and %w", ErrSoldOutUnconfirmed, err)
		}
		// The other refusals rest on the sale's times and existence,
		// which its warm-up confirmed, or on the rate limit: they stand.
		err = nil
	}
	if err != nil {
		_, _, err = admission("reserve", nil, err)
		return 0, err
	}
	res, err := cmd.Slice()
	_, id, err := admission("reserve", res, err)
	return id, err
}

// The refusals of Admit that no replica confirmed. They do not wrap the
// confirmed answers (*domain.AlreadyPurchasedError, domain.ErrSoldOut): a
// caller must not tell them as such.
var (
	ErrHeldUnconfirmed    = errors.New("the buyer holds a unit no replica has confirmed")
	ErrSoldOutUnconfirmed = errors.New("sold out on the primary, not yet on a replica")
)

// Lookup answers what Reserve would answer for userID, without reserving:
// for the sold-out fast path, which must still tell a buyer who holds a
// unit (or retries the request that won) about their order. open reports
// that the sale has a unit for the buyer: only Reserve can take it, so
// the caller goes on to Reserve. Otherwise the answers are Reserve's: the
// order id of a retry of the winning Idempotency-Key with a nil error, or
// one of Reserve's errors.
func (s *Stock) Lookup(ctx context.Context, saleID int64, userID, idemKey string) (orderID int64, open bool, err error) {
	if err := s.ack.Closed(); err != nil {
		// Its answers rest on the primary's state, which the Sentinels
		// no longer vouch for.
		return 0, false, fmt.Errorf("lookup: %w", err)
	}
	// fault: none: lookup.lua only reads.
	res, err := lookupScript.Run(ctx, s.rdb, KeysFor(saleID).admit(), userID, "", idemKey).Slice()
	code, id, err := admission("lookup", res, err)
	return id, code == codeOpen, err
}

// admit is the KEYS of admit.lua, shared by reserve.lua and lookup.lua.
func (k Keys) admit() []string {
	return []string{k.Meta, k.Stock, k.Buyers, k.Intents, k.Idem, k.Version, k.Line}
}

// codeOpen is lookup.lua's answer when reserve.lua would admit the buyer;
// codeLimited is limit.lua's answer for a buyer over the rate limit.
const (
	codeOpen    = 7
	codeLimited = 8
)

// admission decodes the {code, order id} reply of reserve.lua and
// lookup.lua (see admit.lua) into the order id and the business outcome
// as an error; op names the script in errors.
func admission(op string, res []any, err error) (code, orderID int64, _ error) {
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", op, err)
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("%s: unexpected reply %v", op, res)
	}
	code, _ = res[0].(int64)
	switch code {
	case 0, 1, 6:
		id, err := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
		if err != nil {
			return code, 0, fmt.Errorf("%s: bad order id %q: %w", op, res[1], err)
		}
		if code == 1 {
			return code, 0, &domain.AlreadyPurchasedError{OrderID: id}
		}
		return code, id, nil
	case 2:
		return code, 0, domain.ErrSoldOut
	case 3:
		return code, 0, domain.ErrNotStarted
	case 4:
		return code, 0, domain.ErrEnded
	case 5:
		return code, 0, domain.ErrUnknownSale
	case codeOpen:
		return code, 0, nil
	case codeLimited:
		ms, err := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
		if err != nil {
			return code, 0, fmt.Errorf("%s: bad retry delay %q: %w", op, res[1], err)
		}
		return code, 0, &domain.RateLimitedError{RetryAfter: time.Duration(ms) * time.Millisecond}
	}
	return code, 0, fmt.Errorf("%s: unknown code %d", op, code)
}

// Release gives orderID's unit back to the sale if userID still holds it
// under that order. It reports whether a unit went back; calling it again is
// harmless. A released unit is announced on RestockChannel.
func (s *Stock) Release(ctx context.Context, saleID int64, userID string, orderID int64) (bool, error) {
	k := KeysFor(saleID)
	// fault: at the callers: the saga (retried by Temporal) and reconcile.stranded.release.
	n, err := releaseScript.Run(ctx, s.rdb, []string{k.Meta, k.Stock, k.Buyers, k.Idem, k.Version, k.Released, k.Admitted},
		userID, strconv.FormatInt(orderID, 10)).Int()
	if err != nil {
		return false, fmt.Errorf("release: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	s.announceRestock(ctx, saleID)
	return true, nil
}

// announceRestock tells api instances that units of the sale went back on
// sale. The units are back already; a lost announcement only delays
// clearing sold-out flags until they expire, so it is not an error.
func (s *Stock) announceRestock(ctx context.Context, saleID int64) {
	_ = s.rdb.Publish(ctx, RestockChannel, strconv.FormatInt(saleID, 10)).Err()
}

// Sale is what Redis needs to know to admit buyers to a sale.
type Sale struct {
	ID         int64
	PriceCents int64
	StartsAt   time.Time
	EndsAt     time.Time
	// Remaining is how many units Redis may still hand out, and Total the
	// sale's total stock in the database it was computed from.
	Remaining int
	Total     int
	// Buyers maps each user holding a unit to their order id, and
	// WinningKeys those whose winning purchase had an Idempotency-Key to it.
	Buyers      map[string]int64
	WinningKeys map[string]string
	// PaymentTimeout is the sale's own payment timeout, written into each
	// intent; 0: the relay's default.
	PaymentTimeout time.Duration
}

// Warm loads sale into Redis unless it is loaded already, under the sale's
// lock. It reports whether it loaded anything; warming a warm sale changes
// nothing, so a sale in progress is never reset.
func (s *Stock) Warm(ctx context.Context, sale Sale) (bool, error) {
	var loaded bool
	err := s.WithSaleLock(ctx, sale.ID, func(ctx context.Context) error {
		var err error
		loaded, err = s.load(ctx, sale)
		return err
	})
	return loaded, err
}

// Load loads sale into Redis unless it is loaded already, for a caller
// that holds the sale's lock (WithSaleLock) already.
func (s *Stock) Load(ctx context.Context, sale Sale) (bool, error) { return s.load(ctx, sale) }

func (s *Stock) load(ctx context.Context, sale Sale) (bool, error) {
	k := KeysFor(sale.ID)
	timeout := ""
	if sale.PaymentTimeout > 0 {
		timeout = strconv.FormatInt(sale.PaymentTimeout.Milliseconds(), 10)
	}
	args := []any{sale.ID, sale.StartsAt.UnixMilli(), sale.EndsAt.UnixMilli(), sale.PriceCents, sale.Remaining, timeout, sale.Total}
	for user, order := range sale.Buyers {
		args = append(args, user, strconv.FormatInt(order, 10), sale.WinningKeys[user])
	}
	// The sale is listed before it is loaded: SalesKey lives in another
	// hash slot, so the two cannot share a script, and in this order a
	// stop between them leaves a listed sale that admits nobody yet (the
	// next purchase or the reconciler loads it), never a loaded sale whose
	// intents no relay reads (docs/design.md §3.5). Listing again is
	// harmless, so it is done even for a warm sale.
	if err := s.List(ctx, sale.ID); err != nil {
		return false, err
	}
	if err := fault.Hit(fault.WarmList); err != nil {
		return false, err
	}
	n, err := intReply(s.ack.Run(ctx, s.rdb, warmScript, []string{k.Meta, k.Stock, k.Buyers, k.Idem, k.Version, k.Released}, args...))
	if err != nil {
		return false, fmt.Errorf("warm sale %d: %w", sale.ID, err)
	}
	if err := fault.Hit(fault.WarmLoad); err != nil {
		return false, err
	}
	return n == 1, nil
}

// intReply is the integer reply of an acknowledged script run; a reply
// replicas did not confirm is an error.
func intReply(cmd *redis.Cmd, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return cmd.Int()
}

// List adds the sale to the live-sales set the relay reads (SalesKey).
func (s *Stock) List(ctx context.Context, saleID int64) error {
	// fault: warmup.list and reconcile.list, at the callers.
	if err := s.ack.Exec(ctx, s.rdb, func(p redis.Pipeliner) { p.SAdd(ctx, SalesKey, saleID) }); err != nil {
		return fmt.Errorf("list sale %d: %w", saleID, err)
	}
	return nil
}

// lockExpiry bounds how long a crashed holder blocks others; holders
// extend it while they work.
const lockExpiry = 8 * time.Second

// WithSaleLock runs fn while holding the sale's Redlock mutex, extending
// the lock while fn runs. fn's context is cancelled if the lock is lost.
func (s *Stock) WithSaleLock(ctx context.Context, saleID int64, fn func(ctx context.Context) error) error {
	m := s.locks.NewMutex(lockName(saleID), redsync.WithExpiry(lockExpiry), redsync.WithTries(64),
		redsync.WithRetryDelay(100*time.Millisecond))
	if err := m.LockContext(ctx); err != nil {
		return fmt.Errorf("lock sale %d: %w", saleID, err)
	}
	return hold(ctx, m, fn)
}

// WithProbeLock runs fn while holding the deployment's engine-probe lock
// (docs/design.md §4.9: one probe at a time, since the relays share its
// jobs), extending it as WithSaleLock does. held is false, and fn does not
// run, when another probe holds it. A holder that dies frees it within
// lockExpiry.
func (s *Stock) WithProbeLock(ctx context.Context, fn func(ctx context.Context) error) (held bool, err error) {
	// One try, so give it longer than redsync's default 5 % of the expiry
	// (400 ms): a slow answer is not another probe.
	m := s.locks.NewMutex(probeLockName, redsync.WithExpiry(lockExpiry), redsync.WithTimeoutFactor(0.25))
	if err := m.TryLockContext(ctx); err != nil {
		var taken *redsync.ErrTaken
		if errors.As(err, &taken) {
			return false, nil
		}
		return false, fmt.Errorf("lock the engine probe: %w", err)
	}
	return true, hold(ctx, m, fn)
}

// hold runs fn under m, which the caller has just locked: it extends m
// while fn runs, cancels fn's context if m is lost, and unlocks m after.
func hold(ctx context.Context, m *redsync.Mutex, fn func(ctx context.Context) error) error {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(lockExpiry / 3)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				if ok, err := m.ExtendContext(wctx); !ok || err != nil {
					if wctx.Err() == nil {
						cancel() // lost the lock: stop working under it
					}
					return
				}
			}
		}
	}()
	// Deferred, so that a goroutine stopped inside fn (fault.Stop, the
	// in-process crash of the fault tests) stops extending the lock too.
	defer func() {
		cancel()
		<-done
	}()
	err := fn(wctx)
	cancel()
	<-done
	if _, uerr := m.UnlockContext(context.WithoutCancel(ctx)); uerr != nil && err == nil && !errors.Is(uerr, redsync.ErrLockAlreadyExpired) {
		err = fmt.Errorf("unlock %s: %w", m.Name(), uerr)
	}
	return err
}

// State is what Redis holds for one sale.
type State struct {
	Warm      bool
	Remaining int
	Buyers    int64
	Backlog   int64 // intents not yet turned into workflows
	Line      int64 // orders in line: the same orders as Backlog (docs/design.md §3.11)
}

// Inspect reads the sale's Redis state.
func (s *Stock) Inspect(ctx context.Context, saleID int64) (State, error) {
	k := KeysFor(saleID)
	pipe := s.rdb.Pipeline()
	exists := pipe.Exists(ctx, k.Meta)
	left := pipe.Get(ctx, k.Stock)
	buyers := pipe.HLen(ctx, k.Buyers)
	backlog := pipe.XLen(ctx, k.Intents)
	line := pipe.ZCard(ctx, k.Line)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return State{}, fmt.Errorf("inspect sale %d: %w", saleID, err)
	}
	st := State{Warm: exists.Val() == 1, Buyers: buyers.Val(), Backlog: backlog.Val(), Line: line.Val()}
	if v, err := left.Int(); err == nil {
		st.Remaining = v
	}
	return st, nil
}

// Remaining returns the units Redis may still hand out for a sale.
func (s *Stock) Remaining(ctx context.Context, saleID int64) (int, error) {
	n, err := s.rdb.Get(ctx, KeysFor(saleID).Stock).Int()
	if errors.Is(err, redis.Nil) {
		return 0, domain.ErrUnknownSale
	}
	if err != nil {
		return 0, fmt.Errorf("remaining of sale %d: %w", saleID, err)
	}
	return n, nil
}

// Holder returns the order id through which userID holds a unit of the
// sale, if any.
func (s *Stock) Holder(ctx context.Context, saleID int64, userID string) (int64, bool, error) {
	v, err := s.rdb.HGet(ctx, KeysFor(saleID).Buyers, userID).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("holder in sale %d: %w", saleID, err)
	}
	return v, true, nil
}

// Buyers returns every user holding a unit of the sale with their order id.
func (s *Stock) Buyers(ctx context.Context, saleID int64) (map[string]int64, error) {
	m, err := s.rdb.HGetAll(ctx, KeysFor(saleID).Buyers).Result()
	if err != nil {
		return nil, fmt.Errorf("buyers of sale %d: %w", saleID, err)
	}
	out := make(map[string]int64, len(m))
	for u, v := range m {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("buyers of sale %d: bad order id %q", saleID, v)
		}
		out[u] = id
	}
	return out, nil
}

// Sales returns the ids of every sale loaded into Redis.
func (s *Stock) Sales(ctx context.Context) ([]int64, error) {
	members, err := s.rdb.SMembers(ctx, SalesKey).Result()
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	ids := make([]int64, 0, len(members))
	for _, m := range members {
		if id, err := strconv.ParseInt(m, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
