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

// namespaceRefreshWait covers one refresh of the namespace registry of the
// history service (system.namespaceCacheRefreshInterval, 2 s by default): a
// search attribute added through the operator service is listed by the
// frontend at once, but history, which validates UpsertSearchAttributes,
// accepts it only after that refresh.
const namespaceRefreshWait = 2500 * time.Millisecond

// RegisterSearchAttributes adds SaleId, UserId, OrderStatus and PaymentId
// to the namespace if missing, and waits until the namespace lists them
// and, if it added any, until history accepts them. It is idempotent, and the only
// place seckill registers them: `seckill migrate`, and `seckill dev` and
// `seckill temporal` once their Temporal answers (a namespace the embedded
// server creates has them already). An attribute registered with another
// type is an error: it cannot be fixed in place.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	want := workflows.SearchAttributeTypes
	added := false
	for {
		resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
		if err != nil {
			return fmt.Errorf("list search attributes: %w", err)
		}
		missing := map[string]bool{}
		for name, typ := range want {
			got, ok := resp.GetCustomAttributes()[name]
			switch {
			case !ok:
				if _, system := resp.GetSystemAttributes()[name]; system {
					return fmt.Errorf("search attribute %q is a system attribute", name)
				}
				missing[name] = true
			case got != typ:
				return fmt.Errorf("search attribute %q exists in %q as %v, not %v", name, namespace, got, typ)
			}
		}
		if len(missing) == 0 {
			if !added {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(namespaceRefreshWait):
				return nil
			}
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
		added = true
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
