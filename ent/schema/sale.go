package schema

import (
	"time"

	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// Sale is one flash sale: a fixed stock of one product sold in a time window.
// Stock is the source of truth for what is left; Redis only mirrors it.
type Sale struct {
	ent.Schema
}

func (Sale) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").Positive().Immutable(),
		field.String("name").NotEmpty().MaxLen(200),
		field.Int64("price_cents").NonNegative().Immutable(),
		field.Int("total_stock").NonNegative().Immutable(),
		// stock is decremented by DeductStock and incremented by RestoreStock,
		// always together with a stock_movements ledger row.
		field.Int("stock").NonNegative(),
		field.Time("starts_at").Immutable(),
		field.Time("ends_at").Immutable(),
		field.Time("created_at").Default(time.Now).Immutable(),
	}
}

func (Sale) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("orders", Order.Type),
	}
}

func (Sale) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Annotation{
			Table: "sales",
			// The database refuses to oversell even if application code is wrong.
			Checks: map[string]string{
				"sales_stock_non_negative": "stock >= 0",
				"sales_stock_within_total": "stock <= total_stock",
				"sales_window_ordered":     "ends_at > starts_at",
			},
		},
	}
}
