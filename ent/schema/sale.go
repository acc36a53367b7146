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
		// price_cents is in the currency's minor units (cents, fen; yen
		// have none), whatever its name says.
		field.Int64("price_cents").NonNegative().Immutable(),
		// currency is the price's ISO 4217 code. Rows from before it
		// existed get the deployment's default from `seckill migrate`
		// (store.FillCurrency); every sale made since names one.
		field.String("currency").Default("").MaxLen(3).Immutable(),
		// total_stock and stock grow together when an operator adds units
		// (store.AddUnits).
		field.Int("total_stock").NonNegative(),
		// stock is decremented by DeductStock and incremented by RestoreStock,
		// always together with a stock_movements ledger row.
		field.Int("stock").NonNegative(),
		// ends_at moves earlier when an operator ends the sale; starts_at
		// too when the sale is ended before it opened, so the window stays
		// ordered (store.EndSale).
		field.Time("starts_at"),
		field.Time("ends_at"),
		field.Time("created_at").Default(time.Now).Immutable(),
		// cancelled_at is set once when an operator cancels the sale: no
		// order of it deducts stock from then on, and its open orders are
		// cancelled through their workflows.
		field.Time("cancelled_at").Optional().Nillable(),
		// payment_timeout_seconds is how long a buyer of this sale has to pay;
		// nil: the server's --payment-timeout.
		field.Int("payment_timeout_seconds").Optional().Nillable().Range(10, 86_400).Immutable(),
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
