package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/html"

	"github.com/seckill/seckill/api/wire"
)

// Paying at a provider: where the deployment takes payments at one, the
// api's answer to a pay names the payment, and the order stays
// AWAITING_PAYMENT until the provider's notification of the capture
// reaches its workflow. The bench then does what a buyer's browser does
// with a hosted page: it loads the page and submits its Pay form.

// ErrUnpayable is a pay answered with a payment the bench cannot complete:
// one without a hosted page (Stripe's client_secret is for Stripe.js).
var ErrUnpayable = errors.New("the bench cannot complete this payment")

// checkoutTimes are one buyer's steps at the provider.
type checkoutTimes struct {
	page, submit time.Duration
	// captured is when the provider answered the Pay form: the capture is
	// done, its notification on its way.
	captured time.Time
}

// checkoutError is a buyer's step at the provider that failed: "page"
// (loading it, finding its Pay form) or "submit" (the form's answer).
type checkoutError struct {
	step string
	err  error
}

func (e *checkoutError) Error() string { return e.err.Error() }
func (e *checkoutError) Unwrap() error { return e.err }

// payable refuses a payment action the bench cannot complete, saying why.
func payable(a *wire.PaymentAction) error {
	if a.RedirectURL != "" {
		return nil
	}
	if a.ClientSecret != "" {
		return fmt.Errorf("%w: the api takes payments at %q, whose pay answers a client_secret for the provider's own client library, "+
			"not a hosted page; bench --pay against an api with --payment-provider builtin or none", ErrUnpayable, a.Provider)
	}
	return fmt.Errorf("%w: the pay's answer names payment %s at %q with neither a redirect_url nor a client_secret", ErrUnpayable, a.ID, a.Provider)
}

// checkout completes a payment on its hosted page, as a browser: GET the
// page, then submit the form of its Pay button with the form's fields
// (the page's token among them). The provider answers a pay with a
// redirect back to the shop, which the buyer's browser would load; the
// bench stops at the redirect, the shop's page not being the payment's.
func (c *target) checkout(ctx context.Context, pageURL string) (checkoutTimes, error) {
	var t checkoutTimes
	form, err := c.loadPayForm(ctx, pageURL, &t)
	if err != nil {
		return t, &checkoutError{"page", err}
	}
	if err := c.submitPayForm(ctx, form, &t); err != nil {
		return t, &checkoutError{"submit", err}
	}
	return t, nil
}

// loadPayForm GETs the hosted page and finds its Pay form, timing it in t.
func (c *target) loadPayForm(ctx context.Context, pageURL string, t *checkoutTimes) (submission, error) {
	page, err := url.Parse(pageURL)
	if err != nil || (page.Scheme != "http" && page.Scheme != "https") {
		return submission{}, fmt.Errorf("the payment's redirect_url %q is not an http(s) URL", pageURL)
	}
	start := time.Now()
	body, status, err := c.pageGet(ctx, page)
	t.page = time.Since(start)
	if err != nil {
		return submission{}, fmt.Errorf("load the pay page: %w", err)
	}
	if status != http.StatusOK {
		return submission{}, fmt.Errorf("load the pay page: HTTP %d", status)
	}
	return payForm(body, page)
}

// submitPayForm presses Pay: the form sent, the provider's answer timed in
// t, which must be the redirect back to the shop.
func (c *target) submitPayForm(ctx context.Context, form submission, t *checkoutTimes) error {
	start := time.Now()
	var sent io.Reader
	if form.method == http.MethodPost {
		sent = strings.NewReader(form.values.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, form.method, form.action.String(), sent)
	if err != nil {
		return err
	}
	if sent != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.pages.Do(req)
	if err != nil {
		return fmt.Errorf("submit the pay form: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	t.submit = time.Since(start)
	t.captured = time.Now()
	// Anything but the redirect back is the page again, saying why nothing
	// was paid (cancelled or expired meanwhile, a stale form).
	if resp.StatusCode < 300 || resp.StatusCode > 399 {
		return fmt.Errorf("submit the pay form: HTTP %d, not the redirect back to the shop", resp.StatusCode)
	}
	return nil
}

// pageGet loads a page: its body (up to 1 MiB) and status.
func (c *target) pageGet(ctx context.Context, u *url.URL) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := c.pages.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), resp.StatusCode, err
}

// submission is a form as a browser would send it.
type submission struct {
	method string
	action *url.URL
	values url.Values
}

// payForm finds the form whose button reads "Pay" on the page at base and
// returns what pressing it sends: the form's named inputs, and the
// button's own name and value.
func payForm(page string, base *url.URL) (submission, error) {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		return submission{}, fmt.Errorf("read the pay page: %w", err)
	}
	var found *html.Node
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && n.Data == "button" && strings.TrimSpace(text(n)) == "Pay" {
			found = n
			break
		}
	}
	if found == nil {
		return submission{}, errors.New("the pay page has no Pay button (paid, cancelled or expired already?)")
	}
	form := found.Parent
	for form != nil && !(form.Type == html.ElementNode && form.Data == "form") {
		form = form.Parent
	}
	if form == nil {
		return submission{}, errors.New("the pay page's Pay button is in no form")
	}
	s := submission{method: strings.ToUpper(attr(form, "method")), values: url.Values{}}
	if s.method != http.MethodPost {
		s.method = http.MethodGet
	}
	// An empty action is the page itself.
	if s.action, err = base.Parse(attr(form, "action")); err != nil {
		return submission{}, fmt.Errorf("the pay form's action: %w", err)
	}
	for n := range form.Descendants() {
		if n.Type == html.ElementNode && n.Data == "input" && attr(n, "name") != "" {
			switch strings.ToLower(attr(n, "type")) {
			case "submit", "button", "image", "reset", "file":
				continue // sent only when it is the one pressed
			case "checkbox", "radio":
				if !hasAttr(n, "checked") {
					continue
				}
			}
			s.values.Add(attr(n, "name"), attr(n, "value"))
		}
	}
	if name := attr(found, "name"); name != "" {
		s.values.Add(name, attr(found, "value"))
	}
	if s.method == http.MethodGet {
		s.action.RawQuery = s.values.Encode()
	}
	return s, nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// text is the text inside n.
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}
