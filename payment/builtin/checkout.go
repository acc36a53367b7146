package builtin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/text/currency"

	"github.com/seckill/seckill/payment"
)

// The hosted pay page: where a buyer is sent to pay, as to a provider's
// checkout. Plain HTML forms, no script, nothing from elsewhere, so it
// works offline. The page's URL is the capability to pay (a payment's id
// is 128 random bits); the forms carry the payment's own token, which a
// page elsewhere cannot read, so a cross-site form cannot pay or decline.

// checkoutCSS is the page's only style, allowed by its hash in the CSP.
const checkoutCSS = `body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f4f4f6;color:#222}
main{max-width:28rem;margin:3rem auto;background:#fff;padding:1.5rem 2rem;border-radius:8px;box-shadow:0 1px 4px #0002}
h1{font-size:1.1rem;margin:0 0 .25rem}.note{color:#666;font-size:.85rem;margin:0 0 1rem}
dl{display:grid;grid-template-columns:auto 1fr;gap:.25rem 1rem}dt{color:#666}dd{margin:0;word-break:break-all}
.amount{font-size:1.6rem;font-weight:600}.status{padding:.75rem;border-radius:6px;background:#eef}
form{display:flex;gap:.5rem;flex-wrap:wrap;margin:1rem 0}button{font:inherit;padding:.5rem 1rem;border-radius:6px;border:1px solid #888;background:#fff;cursor:pointer}
button[value=pay]{background:#1a7f37;color:#fff;border-color:#1a7f37}.late{border-style:dashed}`

var (
	checkoutStyleHash = func() string {
		sum := sha256.Sum256([]byte(checkoutCSS))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}()
	checkoutTemplate = template.Must(template.New("checkout").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Pay {{.Amount}} · builtin payments</title>
<style>` + checkoutCSS + `</style></head>
<body><main>
<h1>builtin payments</h1>
<p class="note">The payment provider inside seckill: no money moves.</p>
<p class="amount">{{.Amount}}</p>
<dl><dt>Order</dt><dd>{{.OrderID}}</dd><dt>Payment</dt><dd>{{.ID}}</dd><dt>Status</dt><dd>{{.Status}}</dd></dl>
{{with .Message}}<p class="status">{{.}}</p>{{end}}
{{if or .Payable .LatePayable}}<form method="post">
<input type="hidden" name="token" value="{{.Token}}">
{{if .Payable}}<button name="action" value="pay">Pay</button>
<button name="action" value="decline">Decline</button>{{end}}
{{if .LatePayable}}<button class="late" name="action" value="pay_late" title="{{.LateTitle}}">Pay late</button>{{end}}
</form>{{end}}
<p><a href="{{.ReturnURL}}">Back to the shop</a></p>
</main></body></html>
`))
)

type checkoutView struct {
	ID, OrderID, Amount, Status, Message, Token string
	ReturnURL                                   string
	Payable, LatePayable                        bool
	LateTitle                                   string
}

// formatAmount writes an amount in its currency's major units where ISO
// 4217 gives the exponent ("12.34 USD", "500 JPY").
func formatAmount(m payment.Money) string {
	u, err := currency.ParseISO(m.Currency)
	if err != nil {
		return fmt.Sprintf("%d %s (minor units)", m.Minor, m.Currency)
	}
	scale, _ := currency.Standard.Rounding(u)
	s := strconv.FormatInt(m.Minor, 10)
	if scale > 0 {
		s = strings.Repeat("0", max(0, scale+1-len(s))) + s
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	return s + " " + m.Currency
}

func (s *Service) checkoutPage(w http.ResponseWriter, r *http.Request) {
	rec, err := s.load(r, r.PathValue("id"))
	if err != nil {
		s.checkoutError(w, r, err)
		return
	}
	s.renderCheckout(w, rec, http.StatusOK, "")
}

// checkoutAction is a button of the page: pay, decline, or pay late
// (controls). A pay or decline sends the buyer back to the return URL.
func (s *Service) checkoutAction(w http.ResponseWriter, r *http.Request) {
	rec, err := s.load(r, r.PathValue("id"))
	if err != nil {
		s.checkoutError(w, r, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		s.renderCheckout(w, rec, http.StatusBadRequest, "That form could not be read.")
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(rec.FormToken)) != 1 {
		s.renderCheckout(w, rec, http.StatusForbidden, "That form did not come from this page. Nothing changed.")
		return
	}
	action := r.PostForm.Get("action")
	var m move
	switch action {
	case "pay":
		m = move{to: payment.Captured, from: []payment.State{payment.Pending}}
	case "decline":
		m = move{to: payment.Declined, from: []payment.State{payment.Pending}}
	case "pay_late":
		if !s.cfg.Controls {
			s.renderCheckout(w, rec, http.StatusBadRequest, "Unknown action. Nothing changed.")
			return
		}
		s.payLate(w, r, rec)
		return
	default:
		s.renderCheckout(w, rec, http.StatusBadRequest, "Unknown action. Nothing changed.")
		return
	}
	got, changed, err := s.transition(r.Context(), rec.ID, m)
	if err != nil {
		s.checkoutError(w, r, err)
		return
	}
	// A repeated click of the button that already did it sends the buyer
	// back too; anything else (paid after all, cancelled meanwhile) says so.
	if !changed && got.State != m.to {
		s.renderCheckout(w, got, http.StatusConflict, "Nothing changed.")
		return
	}
	s.sendBack(w, r, got)
}

// payLate: a pending payment is captured once the shop cancels it (the
// cancel is answered "canceled", the capture follows); a cancelled or
// expired one is captured now.
func (s *Service) payLate(w http.ResponseWriter, r *http.Request, rec record) {
	if rec.State == payment.Pending {
		if _, err := s.db.ExecContext(r.Context(), `UPDATE builtinpay_payments SET late_capture = 1 WHERE id = $1 AND state = $2`,
			rec.ID, string(payment.Pending)); err != nil {
			s.checkoutError(w, r, err)
			return
		}
		s.sendBack(w, r, rec)
		return
	}
	if _, err := s.CaptureLate(r.Context(), rec.ID); err != nil {
		s.checkoutError(w, r, err)
		return
	}
	got, err := getPayment(r.Context(), s.db, rec.ID)
	if err != nil {
		s.checkoutError(w, r, err)
		return
	}
	s.sendBack(w, r, got)
}

// sendBack redirects the buyer to the payment's return URL, with the
// payment and its state added to the query, as providers do. The shop
// must not take the query's word: it asks the provider.
func (s *Service) sendBack(w http.ResponseWriter, r *http.Request, rec record) {
	u, err := url.Parse(rec.ReturnURL)
	if err != nil {
		s.checkoutError(w, r, err)
		return
	}
	q := u.Query()
	q.Set("payment_id", rec.ID)
	q.Set("payment_status", string(rec.State))
	u.RawQuery = q.Encode()
	s.securityHeaders(w, rec)
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

func (s *Service) renderCheckout(w http.ResponseWriter, rec record, status int, message string) {
	v := checkoutView{
		ID: rec.ID, OrderID: strconv.FormatInt(rec.OrderID, 10), Amount: formatAmount(rec.Amount),
		Status: string(rec.State), Token: rec.FormToken, ReturnURL: rec.ReturnURL,
		Payable: rec.State == payment.Pending, Message: message,
	}
	if s.cfg.Controls && (rec.State == payment.Pending || rec.State == payment.Canceled) {
		v.LatePayable = true
		v.LateTitle = "Test control: capture this payment after the shop cancels it"
		if rec.State == payment.Canceled {
			v.LateTitle = "Test control: capture this payment although it was cancelled"
		}
	}
	if v.Message == "" {
		switch {
		case rec.State == payment.Captured:
			v.Message = "Paid."
		case rec.State == payment.Declined:
			v.Message = "Declined. The shop may offer to pay again."
		case rec.State == payment.Refunded:
			v.Message = "Paid, then refunded."
		case rec.State == payment.Canceled && rec.CancelReason == "expired":
			v.Message = "Expired: the time to pay is over. This payment can no longer be paid."
		case rec.State == payment.Canceled:
			v.Message = "Cancelled by the shop. This payment can no longer be paid."
		}
	}
	s.securityHeaders(w, rec)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := checkoutTemplate.Execute(w, v); err != nil {
		s.log.Warn("builtin payments: render the pay page", "payment_id", rec.ID, "err", err)
	}
}

// securityHeaders: the page's own style only, forms only to here and to the
// return URL a pay redirects to (Chrome checks form-action on the
// redirect), no framing, and no Referer: the page's URL is a capability.
func (s *Service) securityHeaders(w http.ResponseWriter, rec record) {
	formAction := "'self'"
	if u, err := url.Parse(rec.ReturnURL); err == nil && u.Host != "" {
		formAction += " " + u.Scheme + "://" + u.Host
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src "+checkoutStyleHash+"; img-src 'self' data:; "+
		"form-action "+formAction+"; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

func (s *Service) checkoutError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	status, msg := http.StatusInternalServerError, "Something went wrong; try again."
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		status, msg = http.StatusNotFound, "No such payment."
	} else {
		s.log.ErrorContext(r.Context(), "builtin payments: pay page", "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Content-Security-Policy", "default-src 'none'; base-uri 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.Error(w, msg, status)
}
