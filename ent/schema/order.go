package schema

import (
	"time"

	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// Order is one buyer's unit of one sale. Its id is the time-ordered 64-bit id
// minted at admission; the order workflow is "order-<id>".
type Order struct {
	ent.Schema
}

func (Order) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").Positive().Immutable(),
		field.Int64("sale_id").Immutable(),
		field.String("user_id").NotEmpty().MaxLen(128).Immutable(),
		field.Int("quantity").Default(1).Positive().Immutable(),
		field.Int64("amount_cents").NonNegative().Immutable(),
		field.Enum("status").
			Values("PENDING", "AWAITING_PAYMENT", "PAID", "CANCELLED", "EXPIRED", "FAILED", "REFUNDED", "REFUNDED_RESTOCKED"),
		field.String("reason").Default("").MaxLen(500),
		// The Idempotency-Key of the purchase that won the unit ("" if
		// none), so a sale rebuilt from the database still knows it.
		field.String("idempotency_key").Default("").MaxLen(128).Immutable(),
		field.Time("created_at").Default(time.Now).Immutable(),
		field.Time("updated_at").Default(time.Now).UpdateDefault(time.Now),
		// When the order was paid; nil for unpaid orders and for orders
		// paid before the column existed (added by `seckill migrate`).
		field.Time("paid_at").Optional().Nillable(),
		// When the admitting api admitted the order, on its own clock, to
		// the millisecond (the purchase's intent carries it to the row).
		// Not the id's time, which the id fence may put seconds ahead
		// (docs/design.md §3.9). Rows written before the column existed,
		// or by an earlier version since, have none until `seckill
		// migrate` fills it in from their id (store.Migrate).
		field.Time("admitted_at").Optional().Nillable(),
		// The payment at a provider that paid the order (the workflow's
		// payment, docs/design.md §4.3), or, for an order never paid, the
		// one refunded; "" for orders paid without a provider and for
		// orders paid before the columns existed.
		field.String("payment_provider").Default("").MaxLen(32),
		field.String("payment_id").Default("").MaxLen(255),
		// The refund of a capture the order did not keep (it came after
		// the order ended, a second one, a wrong amount), with why and
		// when it was recorded; "" and nil for orders without one. An
		// order records its first such refund: a further one (a third
		// capture) is at the provider and in the workflow's history. An
		// operator's refund of the payment that paid it (REFUNDED,
		// REFUNDED_RESTOCKED) takes these fields over, whatever they held:
		// refund_id is "" for an order paid without a provider.
		field.String("refund_id").Default("").MaxLen(255),
		field.String("refund_reason").Default("").MaxLen(500),
		field.Time("refunded_at").Optional().Nillable(),
	}
}

func (Order) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("sale", Sale.Type).Ref("orders").Field("sale_id").Unique().Required().Immutable(),
	}
}

func (Order) Indexes() []ent.Index {
	return []ent.Index{
		// One live unit per buyer per sale. Orders that ended without a sale
		// (cancelled, expired, failed) returned their unit, and so did a
		// refunded order restocked, so they do not count: the buyer may try
		// again, like any other buyer. A refunded order not restocked keeps
		// its unit, and its buyer's place (domain.Status.Live).
		index.Fields("sale_id", "user_id").Unique().
			StorageKey("orders_one_live_per_buyer").
			Annotations(entsql.IndexWhere("status NOT IN ('CANCELLED', 'EXPIRED', 'FAILED', 'REFUNDED_RESTOCKED')")),
		// The lists page by key (docs/design.md §6.6): a buyer's orders
		// by id, newest first; a sale's orders by admission time, then id,
		// with or without a status, so a window of admission times is a
		// range of either index. (sale_id, id) serves the reads of a
		// sale's rows in id order (live buyers, open orders); (sale_id,
		// status, admitted_at, id) also counts a sale's orders by status.
		index.Fields("user_id", "id"),
		index.Fields("sale_id", "id"),
		index.Fields("sale_id", "admitted_at", "id"),
		index.Fields("sale_id", "status", "admitted_at", "id"),
	}
}

func (Order) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Annotation{
			Table:  "orders",
			Checks: map[string]string{"orders_quantity_one": "quantity = 1"},
		},
	}
}
