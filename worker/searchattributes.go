package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/workflows"
)

// RegisterSearchAttributes adds SaleId, UserId and OrderStatus to the
// namespace if missing, and waits until the namespace lists them. It is
// idempotent.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	want := workflows.SearchAttributeTypes
	for {
		resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
		if err != nil {
			return fmt.Errorf("list search attributes: %w", err)
		}
		missing := map[string]bool{}
		for name := range want {
			if _, ok := resp.GetCustomAttributes()[name]; !ok {
				missing[name] = true
			}
		}
		if len(missing) == 0 {
			return nil
		}
		add := maps.Clone(want)
		maps.DeleteFunc(add, func(name string, _ enumspb.IndexedValueType) bool { return !missing[name] })
		_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace: namespace, SearchAttributes: add,
		})
		var exists *serviceerror.AlreadyExists
		if err != nil && !errors.As(err, &exists) {
			return fmt.Errorf("add search attributes %v: %w", slices.Sorted(maps.Keys(add)), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
