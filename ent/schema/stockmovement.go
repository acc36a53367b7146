package schema

import (
	"time"

	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// StockMovement is the stock ledger. Every change of sales.stock writes one
// row in the same transaction, and (order_id, kind) is unique, so a retried
// DeductStock or RestoreStock changes the stock at most once per order.
type StockMovement struct {
	ent.Schema
}

func (StockMovement) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("order_id").Immutable(),
		field.Int64("sale_id").Immutable(),
		field.Enum("kind").Values("DEDUCT", "RESTORE").Immutable(),
		field.Int("delta").Immutable(),
		field.Time("created_at").Default(time.Now).Immutable(),
	}
}

func (StockMovement) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("order_id", "kind").Unique(),
		index.Fields("sale_id"),
	}
}

func (StockMovement) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Annotation{Table: "stock_movements"},
	}
}
