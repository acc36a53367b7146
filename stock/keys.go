package stock

import "strconv"

// Keys are the Redis keys of one sale. They share the hash tag {sale:ID}, so
// on Redis Cluster they live in one slot and one script can touch them all.
type Keys struct {
	Meta    string // hash: sale_id, starts_ms, ends_ms, price_cents, payment_timeout_ms (optional)
	Stock   string // remaining units
	Buyers  string // hash: user id -> order id of the unit they hold
	Intents string // stream of admitted orders waiting for their workflow
	Idem    string // hash: user id -> Idempotency-Key of their winning request
	// Version counts the changes to the sale's admission state: every
	// admission, release, load and repair increments it. The reconciler
	// repairs only if it has not moved since the reconciler read the sale.
	Version string
	// Released is the set of order ids whose reservation was released
	// (tombstones): an order once released is never given its buyer's
	// entry back, however stale the view of whoever tries.
	Released string
	// Line is the sorted set of the orders in Intents (score: the version
	// reserve.lua moved the sale to when it admitted them), so an order's
	// rank is its place in line (docs/design.md §3.11).
	Line string
	// Started counts the intents the relay has removed from Intents (and
	// Line) since the sale was loaded: the line's departures, whose recent
	// rate estimates a wait.
	Started string
	// Admitted maps an order id to the admitting api's clock when it
	// admitted the order (Unix ms), so an order with no row yet shows its
	// admission time (orders.pendingOf); reserve.lua writes it, a release
	// drops it.
	Admitted string
}

// KeysFor returns the keys of sale id.
func KeysFor(saleID int64) Keys {
	p := keyPrefix(saleID)
	return Keys{Meta: p + "meta", Stock: p + "stock", Buyers: p + "buyers", Intents: p + "intents", Idem: p + "idem",
		Version: p + "ver", Released: p + "released", Line: p + "line", Started: p + "started",
		Admitted: p + "admitted"}
}

// All is every key of the sale, for whoever drops a sale from Redis.
func (k Keys) All() []string {
	return []string{k.Meta, k.Stock, k.Buyers, k.Intents, k.Idem, k.Version, k.Released, k.Line, k.Started, k.Admitted}
}

// RateKey holds a buyer's rate limit state for one sale (limit.lua).
// It carries the sale's hash tag, so on Redis Cluster it lives in the
// slot of the keys reserve.lua touches with it; it expires by itself.
func RateKey(saleID int64, userID string) string {
	return keyPrefix(saleID) + "rate:" + userID
}

// keyPrefix starts every key of a sale, hash tag included.
func keyPrefix(saleID int64) string { return "seckill:{sale:" + strconv.FormatInt(saleID, 10) + "}:" }

// SalesKey is the set of sale ids loaded into Redis. The relay reads it to
// find the intent streams it must drain.
const SalesKey = "seckill:sales"

// RestockChannel carries the id of a sale whenever a unit goes back to its
// stock, so api instances can drop their local sold-out flag.
const RestockChannel = "seckill:restock"

// probeLockName is the deployment's engine-probe lock (WithProbeLock).
const probeLockName = "seckill:lock:engine-probe"

func lockName(saleID int64) string { return "seckill:lock:sale:" + strconv.FormatInt(saleID, 10) }
