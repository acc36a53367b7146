package schema

import (
	"time"

	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// Admission is the reconciler's memory of a purchase Redis admitted before
// its order had a row: what Redis held (sale, buyer, order id) when a pass
// saw it. It outlives Redis and the reconciler, so a reservation Redis later
// loses without its order ever being written is counted and named
// (docs/design.md §3.14), not resold silently. Keyed by the order id: a
// pass that sees the admission again writes nothing.
type Admission struct {
	ent.Schema
}

func (Admission) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").Positive().Immutable(),
		field.Int64("sale_id").Immutable(),
		field.String("user_id").NotEmpty().MaxLen(128).Immutable(),
		// Replicated: the pass confirmed a replica held the admission
		// (--admit-ack=replica), so its buyer was answered 202 or will be
		// on a retry with their key. False when writes wait for no replica.
		field.Bool("replicated").Default(false).Immutable(),
		field.Time("seen_at").Default(time.Now).Immutable(),
		// When a reconciler found the admission lost (gone from Redis, no
		// order row, no workflow): it is counted once, however many
		// reconcilers look.
		field.Time("lost_at").Optional().Nillable(),
		// When a reconciler admitted the lost purchase again under its
		// order id, so that its buyer's 202 is honoured after all.
		field.Time("recovered_at").Optional().Nillable(),
	}
}

func (Admission) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("sale_id", "id"),
	}
}

func (Admission) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Annotation{Table: "admissions"},
	}
}
