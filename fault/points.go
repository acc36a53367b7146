package fault

// The fault points: every place where a path of an order, a sale or an
// instance writes to Redis, Postgres or Temporal, named after the path and
// the write, with what a stop right after the write leaves behind and what
// makes it whole. docs/reliability.md shows this list as a table, and
// api/faultpoints_test.go has an error case and a crash case for every entry:
// a point without both fails the test, and so does a fault.Hit of a point
// that is not listed here.
const (
	// purchase: orders.Service.Purchase
	PurchaseReserve Point = "purchase.reserve"

	// relay: relay.Relay
	RelayStart  Point = "relay.start"
	RelayAck    Point = "relay.ack"
	RelayFenced Point = "relay.fenced"

	// warm-up: stock.Stock.Warm / Load, from a purchase, an operator or
	// the reconciler
	WarmList Point = "warmup.list"
	WarmLoad Point = "warmup.load"

	// operator: api end / add units / cancel a sale
	OperatorEndDB       Point = "operator.end.db"
	OperatorEndRedis    Point = "operator.end.redis"
	OperatorAddDB       Point = "operator.add.db"
	OperatorAddRedis    Point = "operator.add.redis"
	OperatorCancelDB    Point = "operator.cancel.db"
	OperatorCancelRedis Point = "operator.cancel.redis"
	OperatorCancelOrder Point = "operator.cancel.order"

	// reconciler: reconcile.Reconciler
	ReconcileList    Point = "reconcile.list"
	ReconcileMirror  Point = "reconcile.mirror"
	ReconcileRebuild Point = "reconcile.rebuild"
	ReconcileRepair  Point = "reconcile.repair"
	StrandedFinish   Point = "reconcile.stranded.finish"
	StrandedRestore  Point = "reconcile.stranded.restore"
	StrandedRelease  Point = "reconcile.stranded.release"

	// reconciler: the memory of admitted purchases (docs/design.md §3.14)
	AdmissionsRemembered Point = "reconcile.admissions.remember"
	AdmissionLost        Point = "reconcile.admissions.lost"
	AdmissionReadmitted  Point = "reconcile.admissions.readmit"
	AdmissionRecovered   Point = "reconcile.admissions.recovered"

	// retirement: reconcile.Reconciler.Retire
	RetireKeys   Point = "retire.keys"
	RetireUnlist Point = "retire.unlist"

	// engine probe: api's engine-probe, relay.Relay's probe loop
	ProbeLock   Point = "probe.lock"
	ProbeJobs   Point = "probe.jobs"
	ProbeTake   Point = "probe.take"
	ProbeStart  Point = "probe.start"
	ProbeDelete Point = "probe.delete"

	// payment notification: api's POST /v1/payments/{provider}/notify
	PaymentSignal Point = "payment.signal"
	PaymentSettle Point = "payment.settle"

	// payment reconciliation: a worker's pass over the providers' records (reconcile/payments.go)
	ReconcilePaymentSettle Point = "reconcile.payments.settle"
)

// Info describes a point for docs/reliability.md.
type Info struct {
	Point Point
	// Path is the path the point belongs to.
	Path string
	// Write is the write that has just succeeded when the point is hit.
	Write string
	// Stop is what a stop right after the write leaves, and what repairs it.
	Stop string
}

// Points lists every point, in the order of docs/reliability.md.
var Points = []Info{
	{PurchaseReserve, "purchase", "Redis: reserve.lua took the unit, recorded the buyer and queued the intent",
		"the buyer has no answer; the relay starts the order, and a retry with the same Idempotency-Key answers the same 202 (without a key: 409 ALREADY_PURCHASED with the order id)"},
	{RelayStart, "relay", "Temporal: the order's workflow was started",
		"the intent is unacknowledged; a relay reclaims it, meets the same order's workflow and acknowledges it"},
	{RelayAck, "relay", "Redis: the intent acknowledged and its order taken off the line",
		"nothing: the order's workflow runs"},
	{RelayFenced, "relay", "Postgres: the orders of intents the fence kept from starting remembered as admissions no replica was seen to hold (store.RememberFenced)",
		"the intents stay pending; the next round, or the relay that reclaims them, remembers them again (once: the record is keyed by order), and after the failover a reconciler pass admits each again under its order id"},
	{WarmList, "warm-up", "Redis: the sale added to the live-sales set the relay reads, before its keys are loaded",
		"a listed sale that is not loaded admits nobody; the next purchase or the reconciler loads it"},
	{WarmLoad, "warm-up", "Redis: warm.lua loaded the sale's window, stock and buyers",
		"nothing: the sale was listed first"},
	{OperatorEndDB, "operator", "Postgres: the sale's end set to now",
		"Redis still admits until the old end; the reconciler mirrors the database's window into Redis, and an order admitted after the end is refused by PlaceOrder"},
	{OperatorEndRedis, "operator", "Redis: end.lua set the new window",
		"nothing: both stores agree"},
	{OperatorAddDB, "operator", "Postgres: the units added to stock and total",
		"Redis holds fewer units than the database, the side that cannot oversell; the reconciler raises it once no order is on its way"},
	{OperatorAddRedis, "operator", "Redis: add.lua added the units",
		"nothing: both stores agree"},
	{OperatorCancelDB, "operator", "Postgres: the sale marked cancelled and ended",
		"Redis still admits; the reconciler mirrors the end, the cancellation rescan cancels every open order, and PlaceOrder refuses the sale's unplaced orders"},
	{OperatorCancelRedis, "operator", "Redis: end.lua ended the cancelled sale",
		"the open orders are cancelled by the rescan every instance runs"},
	{OperatorCancelOrder, "operator", "Temporal: the cancel update of one open order accepted",
		"the rescan sends it again under the same update id; the workflow answers once"},
	{ReconcileList, "reconciler", "Redis: a loaded sale re-added to the live-sales set",
		"nothing: the next pass lists it again"},
	{ReconcileMirror, "reconciler", "Redis: the database's window (an operator's end) mirrored",
		"nothing: the next pass finds them equal"},
	{ReconcileRebuild, "reconciler", "Redis: a sale Redis lost loaded again from the database",
		"nothing: the sale is listed and loaded"},
	{ReconcileRepair, "reconciler", "Redis: repair.lua restored buyers, released stale units, set the count",
		"nothing: the next pass plans from what is then true"},
	{StrandedFinish, "reconciler", "Postgres: the row of an order whose workflow closed without ending it is final (MarkPaid or FinishOrder)",
		"the unit is still taken; the next pass finds the order again by its ledger and restores and releases it"},
	{StrandedRestore, "reconciler", "Postgres: that order's unit restored",
		"Redis still holds the buyer; the next pass's count repair releases it (the database has the unit back)"},
	{StrandedRelease, "reconciler", "Redis: that order's unit released",
		"the buyer was not told; their socket's snapshot on connect carries the row"},
	{AdmissionsRemembered, "reconciler", "Postgres: the buyers a pass saw in Redis without an order row remembered (store.RememberAdmissions)",
		"the pass ends before its listing, rebuild or repair, which the next pass does; it remembers the same buyers again, writing no new row, and one whose order is placed meanwhile is never called lost"},
	{AdmissionLost, "reconciler", "Postgres: a remembered admission that Redis lost, with no order row and no workflow, marked lost (store.MarkAdmissionLost)",
		"the loss is recorded and `seckill audit` names it, but the pass neither logs, counts nor admits it again; the next pass, while the sale is open, admits it again under its order id and the saga places it"},
	{AdmissionReadmitted, "reconciler", "Redis: reserve.lua admitted that lost purchase again under its order id",
		"it is not marked recovered nor counted; the relay starts the order from the intent the script queued and the saga places it once (the next pass finds the buyer held and admits nothing)"},
	{AdmissionRecovered, "reconciler", "Postgres: that admission marked recovered (store.MarkAdmissionRecovered)",
		"the pass's log and the recovered count miss it; the relay starts the order and the saga places it"},
	{RetireKeys, "retirement", "Redis: retire.lua dropped a drained sale's keys",
		"the sale is still listed; the next pass retires it again and unlists it"},
	{RetireUnlist, "retirement", "Redis: the sale removed from the live-sales set",
		"nothing: the database alone answers for the sale"},
	{ProbeLock, "engine probe", "Redis: the deployment's probe lock taken",
		"no job is queued; another probe is answered 503 with Retry-After until the lock expires, within 8 s (an error gives it back at once)"},
	{ProbeJobs, "engine probe", "Redis: the probe's jobs queued for the relays",
		"the relays start its workflows and the order worker runs them, read by nobody; the lock expires within 8 s, and the next probe's jobs replace any left (an error takes them back at once)"},
	{ProbeTake, "engine probe", "Redis: a relay took one job of the probe",
		"the job's workflows are never started: the probe sees its starts stall and answers 503 after 15 s, not at its deadline"},
	{ProbeStart, "engine probe", "Temporal: one probe workflow started",
		"the workflow runs; a relay that dies loses the rest of its job, as above (an error is reported, and the probe answers 503 naming it)"},
	{ProbeDelete, "engine probe", "Temporal: one probe workflow deleted, after the probe measured",
		"the workflow goes all the same; an api that dies leaves the rest of its probe's workflows listed, and the next probe deletes them (an error counts it undeleted in the probe's answer, which stands)"},
	{PaymentSignal, "payment notification", "Temporal: a verified payment event signalled to its order's workflow",
		"the provider has no 2xx and sends the notification again (the built-in provider from its outbox, Stripe for days); the workflow acts on an event id once, and once it has closed the repeat goes to the payment's PaymentSettleWorkflow, which keeps a capture that paid the order and refunds any other"},
	{PaymentSettle, "payment notification", "Temporal: the PaymentSettleWorkflow of an event whose order's workflow had closed started",
		"the workflow runs and refunds the late capture; the provider sends the notification again, and its start finds the payment's workflow started (RejectDuplicate) and answers 200: one settlement, one refund at the provider"},
	{ReconcilePaymentSettle, "payment reconciliation", "Temporal: the PaymentSettleWorkflow of a capture no order kept, started by the pass",
		"the workflow runs and refunds the capture; the next pass finds the payment's workflow started and counts the capture settled, and the notification that comes late finds it too: one settlement, one refund at the provider"},
}

// lookup returns the point's Info.
func lookup(p Point) (Info, bool) {
	for _, i := range Points {
		if i.Point == p {
			return i, true
		}
	}
	return Info{}, false
}
