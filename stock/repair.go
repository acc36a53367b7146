package stock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Snapshot is a sale's admission state in Redis at one instant.
type Snapshot struct {
	// Version counts the changes to the sale; Repair applies a plan only
	// while it is unchanged.
	Version   int64
	Warm      bool // the sale is loaded
	Remaining int
	// Buyers maps each user holding a unit to their order id.
	Buyers map[string]int64
	// Backlog is the intents not yet turned into workflows.
	Backlog int64
}

// Snapshot reads the sale's state atomically: no admission or release
// falls between its parts.
func (s *Stock) Snapshot(ctx context.Context, saleID int64) (Snapshot, error) {
	return s.snapshot(ctx, s.rdb, saleID)
}

// SnapshotReplicated is Snapshot, and reports whether the acknowledgement
// policy's replicas held everything it read (docs/design.md §3.13): the
// read and the wait go on one connection, so a failover between them
// cannot have a new primary, which never saw what the old one showed,
// confirm it. Without a policy, or on a client that cannot lend one
// connection (a cluster), replicated is false. A wait that fails is not an
// error: the snapshot is still what Redis held.
func (s *Stock) SnapshotReplicated(ctx context.Context, saleID int64) (snap Snapshot, replicated bool, err error) {
	if !s.ack.On() {
		snap, err = s.Snapshot(ctx, saleID)
		return snap, false, err
	}
	conn, giveBack, single := s.LendConn()
	defer giveBack()
	if snap, err = s.snapshot(ctx, conn, saleID); err != nil || !single {
		return snap, false, err
	}
	return snap, s.AwaitReplicasOn(ctx, conn) == nil, nil
}

func (s *Stock) snapshot(ctx context.Context, c redis.Scripter, saleID int64) (Snapshot, error) {
	k := KeysFor(saleID)
	res, err := snapshotScript.Run(ctx, c, []string{k.Meta, k.Stock, k.Buyers, k.Intents, k.Version}).Slice()
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of sale %d: %w", saleID, err)
	}
	bad := func(what string, v any) (Snapshot, error) {
		return Snapshot{}, fmt.Errorf("snapshot of sale %d: bad %s %v", saleID, what, v)
	}
	if len(res) != 5 {
		return bad("reply", res)
	}
	snap := Snapshot{Buyers: map[string]int64{}}
	if snap.Version, err = strconv.ParseInt(fmt.Sprint(res[0]), 10, 64); err != nil {
		return bad("version", res[0])
	}
	warm, _ := res[1].(int64)
	snap.Warm = warm == 1
	if left := fmt.Sprint(res[2]); left != "" {
		if snap.Remaining, err = strconv.Atoi(left); err != nil {
			return bad("remaining", left)
		}
	}
	snap.Backlog, _ = res[3].(int64)
	flat, ok := res[4].([]any)
	if !ok || len(flat)%2 != 0 {
		return bad("buyers", res[4])
	}
	for i := 0; i < len(flat); i += 2 {
		id, err := strconv.ParseInt(fmt.Sprint(flat[i+1]), 10, 64)
		if err != nil {
			return bad("order id", flat[i+1])
		}
		snap.Buyers[fmt.Sprint(flat[i])] = id
	}
	return snap, nil
}

// RepairPlan is what the reconciler found wrong in a Snapshot.
type RepairPlan struct {
	// RestoreBuyers maps users to the live order whose entry Redis lost.
	// An order that was released meanwhile is refused, and a buyer who
	// holds another entry keeps it.
	RestoreBuyers map[string]int64
	// RestoreKeys maps restored users to the Idempotency-Key of the
	// purchase that won (the order row keeps it), so a retry of that
	// request still answers its 202 after the repair.
	RestoreKeys map[string]string
	// Release maps users to the ended order whose reservation is still
	// held, to be released as release.lua does.
	Release map[string]int64
	// SetRemaining sets the remaining count to Remaining after the releases,
	// computed from a database whose total stock was Total.
	SetRemaining bool
	Remaining    int
	Total        int
}

// Empty reports whether the plan changes nothing.
func (p RepairPlan) Empty() bool {
	return len(p.RestoreBuyers) == 0 && len(p.Release) == 0 && !p.SetRemaining
}

// RepairResult says what Repair did.
type RepairResult struct {
	// Applied is false when the sale changed since the snapshot (or is no
	// longer loaded): then nothing was done.
	Applied        bool
	BuyersRestored int
	BuyersRefused  int // their order was released after the snapshot's caller read it
	Released       int
	RemainingWas   int
	RemainingNow   int
}

// Repair applies plan in one atomic step if the sale's version is still
// version, the one its Snapshot read; otherwise it does nothing, so a
// repair computed from a view a purchase or release has made stale never
// lands. A repair that leaves more units on sale than before (releases, a
// higher count) is announced on RestockChannel.
func (s *Stock) Repair(ctx context.Context, saleID, version int64, plan RepairPlan) (RepairResult, error) {
	k := KeysFor(saleID)
	remaining := ""
	if plan.SetRemaining {
		remaining = strconv.Itoa(plan.Remaining)
	}
	args := []any{version, remaining, plan.Total, len(plan.RestoreBuyers)}
	for user, id := range plan.RestoreBuyers {
		args = append(args, user, strconv.FormatInt(id, 10), plan.RestoreKeys[user])
	}
	for user, id := range plan.Release {
		args = append(args, user, strconv.FormatInt(id, 10))
	}
	cmd, err := s.ack.Run(ctx, s.rdb, repairScript, []string{k.Meta, k.Stock, k.Buyers, k.Idem, k.Version, k.Released}, args...)
	var res []int64
	if err == nil {
		res, err = cmd.Int64Slice()
	}
	if err != nil {
		return RepairResult{}, fmt.Errorf("repair sale %d: %w", saleID, err)
	}
	if len(res) != 6 {
		return RepairResult{}, fmt.Errorf("repair sale %d: unexpected reply %v", saleID, res)
	}
	r := RepairResult{Applied: res[0] == 1, BuyersRestored: int(res[1]), BuyersRefused: int(res[2]),
		Released: int(res[3]), RemainingWas: int(res[4]), RemainingNow: int(res[5])}
	if r.RemainingNow > r.RemainingWas {
		s.announceRestock(ctx, saleID)
	}
	return r, nil
}
