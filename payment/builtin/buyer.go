package builtin

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// The buyer's side of the hosted page, for programs that play a buyer
// against the built-in provider (the tests, seckill's own tools): what a
// browser does with the page and one of its buttons.

var (
	pageForm  = regexp.MustCompile(`<form method="post"(?: action="([^"]*)")?>`)
	pageToken = regexp.MustCompile(`name="token" value="([^"]+)"`)
)

// PressButton loads the hosted page at page and submits its form with the
// button action ("pay", "decline", "pay_late") and the page's token, as a
// browser would. It answers the page's answer without following it: 303
// and the return URL (with payment_id and payment_status) for a pay or a
// decline, or the page again with a message and its status.
func PressButton(ctx context.Context, c *http.Client, page, action string) (status int, location string, err error) {
	if c == nil {
		c = http.DefaultClient
	}
	noFollow := *c
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, page, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := noFollow.Do(req)
	if err != nil {
		return 0, "", err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return 0, "", err
	}
	form, token := pageForm.FindSubmatch(body), pageToken.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || form == nil || token == nil {
		return resp.StatusCode, "", fmt.Errorf("builtin: the page %s (%d) has no form to submit", page, resp.StatusCode)
	}
	target, err := url.Parse(page)
	if err != nil {
		return 0, "", err
	}
	if a := html.UnescapeString(string(form[1])); a != "" {
		if target, err = target.Parse(a); err != nil {
			return 0, "", err
		}
	}
	values := url.Values{"token": {html.UnescapeString(string(token[1]))}, "action": {action}}
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, target.String(), strings.NewReader(values.Encode()))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = noFollow.Do(req)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location"), nil
}
