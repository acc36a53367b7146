package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/orders"
)

// An operator refunds a paid order (docs/design.md §4.11): the order's
// OrderRefundWorkflow gives the payment back at its provider and records
// it, restocking the unit once if asked and the sale is still open.

func (s *Server) registerRefunds() {
	huma.Register(s.api, huma.Operation{
		OperationID: "refund-order", Method: http.MethodPost, Path: "/v1/admin/orders/{id}/refund",
		Summary: "Refund a paid order (admin)",
		Description: "Gives a PAID order's payment back, whole, at the provider that took it, and records it: the order becomes REFUNDED, its unit staying out of the sale, " +
			"or, with `restock` while the sale is open (not ended, not cancelled), REFUNDED_RESTOCKED: its unit goes back on sale, in the database and to buyers at once, and its buyer may buy again. " +
			"A restock asked on a closed sale is not done, and that is no error: the order's `reason` says so. An order paid without a provider is recorded refunded with no provider call. " +
			"The buyer is told over the websocket.\n\n" +
			"Answers 200 with the order once the refund is recorded, or 202 with the order, still PAID, if the refund is under way after a few seconds (a provider that cannot be reached is asked again until it takes the refund; read the order later). " +
			"The refund is the order's own (no Idempotency-Key needed): a repeated request joins the refund under way, or answers the refunded order as it is, and never refunds or restocks twice; the first request's `restock` decides. " +
			"An order that is not PAID answers 409 INVALID_STATE with its status in `order_status`; so does a refund the provider refuses (the order stays PAID).",
		Tags: []string{"orders"}, Security: bearer, Metadata: map[string]any{adminOnly: true},
		MaxBodyBytes: 2 << 10,
		Responses: s.withAccepted("The refund is under way but not recorded yet: the order, still PAID, becomes REFUNDED or REFUNDED_RESTOCKED once the provider has taken the refund.",
			s.problems(errMalformed, errNoToken, errAdminsOnly, errNoOrderAdmin, errRefundRefused, errTooLarge, errNotJSON, errInvalid, errUnavailable)),
	}, func(ctx context.Context, in *struct {
		ID   string `path:"id" pattern:"^[0-9]+$" maxLength:"19" example:"7262577203974242304" doc:"The order's id."`
		Body wire.RefundBody
	}) (*orderOutput, error) {
		id, err := parseID(in.ID)
		if err != nil {
			return nil, err
		}
		o, err := s.orders.Refund(ctx, userFrom(ctx), id, orders.RefundRequest{Reason: in.Body.Reason, Restock: in.Body.Restock})
		return s.outcome(ctx, o, err)
	})
}
