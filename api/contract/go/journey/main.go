// Command journey is a buyer's journey through the generated Go client
// (package seckillapi), against a running seckill: an admin creates a
// sale; a buyer buys (202), buys again (409 ALREADY_PURCHASED with the
// order's id, read from the typed problem), reads the order until it
// awaits payment, pays it (on the provider's hosted page when pay answers
// with one, as the buyer's browser would) and lists their orders. Every
// id it sends is one it read from an answer, passed on as is. It exits 1
// at the first answer that is not the documented one.
//
//	SECKILL_URL=http://127.0.0.1:8080 ADMIN_TOKEN=... BUYER_TOKEN=... go run ./journey
package main

import (
	"context"
	"fmt"
	"html"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
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
		// Accepted: the buyer pays at the provider, or the payment was
		// decided and is not recorded within the server's wait yet.
		if pay := paid.JSON202.Payment; pay != nil {
			if pay.RedirectUrl == nil {
				return fmt.Errorf("pay answered payment %s at %s without a page to pay on (a client secret is for the provider's own client)", pay.Id, pay.Provider)
			}
			if err := payOnPage(ctx, *pay.RedirectUrl); err != nil {
				return fmt.Errorf("pay order %s at %s: %w", orderID, pay.Provider, err)
			}
			fmt.Printf("go journey: paid order %s on the %s provider's page\n", orderID, pay.Provider)
		}
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

// tokenField is the hosted page's form token: the page guards its form
// against cross-site posts, so a buyer pays from the page itself.
var tokenField = regexp.MustCompile(`name="token" value="([^"]+)"`)

// payOnPage pays as the buyer's browser would on the provider's hosted
// page: read it, then submit its Pay button with its token. The provider
// sends the buyer back to the shop (303) and notifies seckill, whose
// workflow makes the order PAID.
func payOnPage(ctx context.Context, page string) error {
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, page, nil)
	if err != nil {
		return err
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	m := tokenField.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		return fmt.Errorf("GET %s: %d, no payment form", page, resp.StatusCode)
	}
	form := url.Values{"token": {html.UnescapeString(string(m[1]))}, "action": {"pay"}}
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, page, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = noRedirect.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("submit Pay on %s: %d, want 303 back to the shop", page, resp.StatusCode)
	}
	return nil
}
