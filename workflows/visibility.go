package workflows

import (
	"fmt"
	"strconv"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/domain"
)

// Search attributes, so the Temporal Web UI can list and filter orders.
var (
	SaleIDKey      = temporal.NewSearchAttributeKeyKeyword("SaleId")
	UserIDKey      = temporal.NewSearchAttributeKeyKeyword("UserId")
	OrderStatusKey = temporal.NewSearchAttributeKeyKeyword("OrderStatus")
	// PaymentIDKey is the provider's id of the payment an order was paid
	// with, or of its last payment attempt once it ended otherwise: set by
	// workflows started at VersionPayments with a provider, in the same
	// upsert as the status that follows the payment (no visibility write
	// of its own).
	PaymentIDKey = temporal.NewSearchAttributeKeyKeyword("PaymentId")
)

// SearchAttributes returns the search attributes of an order in status.
func SearchAttributes(ref domain.OrderRef, status domain.Status) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		SaleIDKey.ValueSet(strconv.FormatInt(ref.SaleID, 10)),
		UserIDKey.ValueSet(ref.UserID),
		OrderStatusKey.ValueSet(string(status)),
	)
}

// Summary is the one-line memo shown for an order in the Web UI. Orders
// start with the summary without a status ("" status), which their memo
// keeps: their status is the OrderStatus search attribute. Workflows
// started before VersionLeanSaga upsert it with the status at every step.
func Summary(ref domain.OrderRef, status domain.Status) string {
	s := fmt.Sprintf("order %d: user %s, sale %d, %d cents", ref.OrderID, ref.UserID, ref.SaleID, ref.AmountCents)
	if status != "" {
		s += ": " + string(status)
	}
	return s
}

// SearchAttributeTypes are the custom search attributes a namespace needs
// before order workflows can start.
var SearchAttributeTypes = map[string]enumspb.IndexedValueType{
	SaleIDKey.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	UserIDKey.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	OrderStatusKey.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	PaymentIDKey.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// FilteredSearchAttributes are the search attributes that seckill's own
// visibility queries and its operators filter on: SaleId (the audit's count
// of a sale's open workflows, the stranded repair of one sale, the bench's
// link to the Web UI), OrderStatus (the stranded repair) and UserId (the
// Web UI filter README's tour and support use: "what became of this
// buyer's order?"). A trim of Temporal's visibility indexes keeps theirs
// (seckill temporal --visibility-indexes).
var FilteredSearchAttributes = []string{SaleIDKey.GetName(), OrderStatusKey.GetName(), UserIDKey.GetName()}
