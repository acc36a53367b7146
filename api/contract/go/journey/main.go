// Command journey is a buyer's journey through the generated Go client
// (package seckillapi), against a running seckill: an admin creates a
// sale; a buyer buys (202), buys again (409 ALREADY_PURCHASED with the
// order's id, read from the typed problem), reads the order until it
// awaits payment, pays it and lists their orders. Every id it sends is one
// it read from an answer, passed on as is. It exits 1 at the first answer
// that is not the documented one.
//
//	SECKILL_URL=http://127.0.0.1:8080 ADMIN_TOKEN=... BUYER_TOKEN=... go run ./journey
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/seckill/seckill/api/contract/go/seckillapi"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("go journey: ")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := journey(ctx, env("SECKILL_URL"), env("ADMIN_TOKEN"), env("BUYER_TOKEN")); err != nil {
		log.Fatal(err)
	}
	fmt.Println("go journey: ok")
}

func env(name string) string {
	v := os.Getenv(name)
	if v == "" {
		log.Fatalf("%s is not set", name)
	}
	return v
}

// as is a client that sends token.
func as(base, token string) (*seckillapi.ClientWithResponses, error) {
	return seckillapi.NewClientWithResponses(base, seckillapi.WithRequestEditorFn(
		func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
}

func journey(ctx context.Context, base, adminToken, buyerToken string) error {
	admin, err := as(base, adminToken)
	if err != nil {
		return err
	}
	buyer, err := as(base, buyerToken)
	if err != nil {
		return err
	}

	now := time.Now()
	created, err := admin.CreateSaleWithResponse(ctx, seckillapi.CreateSaleBody{
		Name: "contract (go)", PriceCents: 1999, Stock: 5,
		StartsAt: now.Add(-time.Second), EndsAt: now.Add(time.Hour),
	})
	if err != nil {
		return err
	}
	if created.JSON201 == nil {
		return unexpected("create sale", created.StatusCode(), created.Body)
	}
	sale := created.JSON201
	if sale.State != seckillapi.Active || sale.Remaining != 5 {
		return fmt.Errorf("new sale: %+v, want active with 5 remaining", sale)
	}

	// Public: no token needed, and the id from the body goes into the path.
	anyone, err := seckillapi.NewClientWithResponses(base)
	if err != nil {
		return err
	}
	got, err := anyone.GetSaleWithResponse(ctx, sale.Id)
	if err != nil {
		return err
	}
	if got.JSON200 == nil || got.JSON200.Id != sale.Id {
		return unexpected("get sale", got.StatusCode(), got.Body)
	}

	bought, err := buyer.PurchaseWithResponse(ctx, sale.Id, &seckillapi.PurchaseParams{})
	if err != nil {
		return err
	}
	if bought.JSON202 == nil {
		return unexpected("purchase", bought.StatusCode(), bought.Body)
	}
	orderID := bought.JSON202.OrderId
	if bought.JSON202.Status != seckillapi.PurchaseStatusPENDING {
		return fmt.Errorf("purchase: status %s, want PENDING", bought.JSON202.Status)
	}

	again, err := buyer.PurchaseWithResponse(ctx, sale.Id, &seckillapi.PurchaseParams{})
	if err != nil {
		return err
	}
	p := again.ApplicationproblemJSON409
	if p == nil {
		return unexpected("second purchase", again.StatusCode(), again.Body)
	}
	if p.Code != seckillapi.ALREADYPURCHASED || p.OrderId == nil || *p.OrderId != orderID {
		return fmt.Errorf("second purchase: problem %+v, want ALREADY_PURCHASED with order %s", p, orderID)
	}

	// The order's workflow takes it to AWAITING_PAYMENT; read it until then.
	var order *seckillapi.Order
	for order == nil || order.Status != seckillapi.OrderStatusAWAITINGPAYMENT {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("order %s never awaited payment (last %+v): %w", orderID, order, err)
		}
		r, err := buyer.GetOrderWithResponse(ctx, orderID)
		if err != nil {
			return err
		}
		if r.JSON200 == nil {
			return unexpected("get order", r.StatusCode(), r.Body)
		}
		order = r.JSON200
		if order.Id != orderID || order.SaleId != sale.Id {
			return fmt.Errorf("get order: %+v, want order %s of sale %s", order, orderID, sale.Id)
		}
		if order.Status != seckillapi.OrderStatusPENDING && order.Status != seckillapi.OrderStatusAWAITINGPAYMENT {
			return fmt.Errorf("order %s is %s, want PENDING then AWAITING_PAYMENT", orderID, order.Status)
		}
		time.Sleep(50 * time.Millisecond) // between reads: the loop's exit is the order's status
	}

	paid, err := buyer.PayOrderWithResponse(ctx, orderID)
	if err != nil {
		return err
	}
	switch {
	case paid.JSON200 != nil && paid.JSON200.Status == seckillapi.OrderStatusPAID:
	case paid.JSON202 != nil:
		// Accepted but not recorded within the server's wait: it will be.
		for {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("order %s accepted its payment but never became PAID: %w", orderID, err)
			}
			r, err := buyer.GetOrderWithResponse(ctx, orderID)
			if err != nil {
				return err
			}
			if r.JSON200 == nil {
				return unexpected("get order", r.StatusCode(), r.Body)
			}
			if r.JSON200.Status == seckillapi.OrderStatusPAID {
				break
			}
			time.Sleep(50 * time.Millisecond) // between reads: the loop's exit is the order's status
		}
	default:
		return unexpected("pay", paid.StatusCode(), paid.Body)
	}

	list, err := buyer.ListOrdersWithResponse(ctx, &seckillapi.ListOrdersParams{})
	if err != nil {
		return err
	}
	if list.JSON200 == nil {
		return unexpected("list orders", list.StatusCode(), list.Body)
	}
	if !slices.ContainsFunc(*list.JSON200, func(o seckillapi.Order) bool {
		return o.Id == orderID && o.Status == seckillapi.OrderStatusPAID
	}) {
		return fmt.Errorf("list orders: %+v lacks the paid order %s", *list.JSON200, orderID)
	}

	// An order that is not the buyer's is not found, as a typed problem.
	none, err := buyer.GetOrderWithResponse(ctx, "1")
	if err != nil {
		return err
	}
	if none.ApplicationproblemJSON404 == nil || none.ApplicationproblemJSON404.Code != seckillapi.NOTFOUND {
		return unexpected("unknown order", none.StatusCode(), none.Body)
	}
	return nil
}

func unexpected(what string, status int, body []byte) error {
	return fmt.Errorf("%s: unexpected answer %d %s", what, status, body)
}
