package api

import (
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
)

// The OpenAPI document is a contract for clients generated from it
// (oapi-codegen, openapi-typescript and the like), so what it says is
// chosen for them: ids are strings everywhere, paths included; every
// operation says who may call it and lists the problems it answers, with
// examples; schema names do not collide with the names generators derive
// from operation ids. api/openapi holds the document as served, and the
// contract test in api/contract generates, compiles and runs clients from
// it.

// describe fills the document-wide parts of the description. Nothing in
// it depends on the deployment: the committed document is the one every
// `seckill serve` serves.
func describe(hc *huma.Config) {
	hc.Info.Description = "Flash sales: a buyer's purchase is admitted or refused at once, and the order it creates " +
		"then moves on in the background (PENDING, AWAITING_PAYMENT, then PAID, CANCELLED, EXPIRED or FAILED); " +
		"its progress can be read with GET /v1/orders/{id} or followed on the websocket GET /v1/ws.\n\n" +
		"Ids are strings of digits everywhere, in bodies and paths alike: they are 64-bit and exceed the integers " +
		"JavaScript represents exactly, so pass them on as received. Every error is an RFC 9457 problem " +
		"(`application/problem+json`) whose `code` is the stable value to branch on."
	hc.Info.Contact = &huma.Contact{Name: "seckill maintainers", URL: "https://github.com/seckill/seckill"}
	// The repository states no licence: the API is not licensed to third
	// parties until it does.
	hc.Info.License = &huma.License{Name: "Proprietary"}
	// Relative: the API is where the document is, whatever the deployment.
	hc.Servers = []*huma.Server{{URL: "/", Description: "The deployment serving this document."}}
	hc.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {
			Type: "http", Scheme: "bearer", BearerFormat: "JWT",
			Description: "An HS256 JWT whose `sub` is the user id and whose `role` is `buyer` or `admin`.",
		},
	}
	// Every operation needs a token unless it says otherwise (public).
	hc.Security = bearer
	hc.Tags = []*huma.Tag{
		{Name: "sales", Description: "Sales: browse them (anyone) and run them (admins)."},
		{Name: "orders", Description: "A buyer's purchases and their orders."},
		{Name: "health", Description: "Probes and deployment facts."},
		{Name: "payments", Description: "What payment providers call: their notifications, authenticated by the provider's signature."},
		{Name: "dev", Description: "Present only in dev mode (`seckill dev`), never in production."},
	}
}

// public marks an operation anyone may call: an empty security requirement,
// which overrides the document's global bearer requirement.
var public = []map[string][]string{}

// problemExample is one problem an operation may answer, shown as an
// example in the document.
type problemExample struct {
	name    string
	summary string
	p       wire.Problem
	// header documents a response header that comes with the problem.
	header string
}

func example(name, summary string, status int, code, detail string) problemExample {
	return problemExample{name: name, summary: summary, p: wire.Problem{
		ErrorModel: huma.ErrorModel{Status: status, Title: http.StatusText(status), Detail: detail},
		Code:       code,
	}}
}

// The problems of the API. The details are those the api writes.
var (
	errMalformed = example("malformed", "The body is not valid JSON", http.StatusBadRequest, wire.CodeBadRequest,
		"unexpected end of JSON input")
	errNoToken = example("no-token", "No bearer token, or an invalid or expired one", http.StatusUnauthorized, wire.CodeUnauthorized,
		"a bearer token is required")
	errAdminsOnly = example("admins-only", "The token is not an admin's", http.StatusForbidden, wire.CodeForbidden,
		"admins only")
	errNoSale = example("no-such-sale", "No sale has this id", http.StatusNotFound, wire.CodeNotFound,
		"no such sale")
	errNoOrder = example("no-such-order", "No order of yours has this id (another buyer's order is not found either)",
		http.StatusNotFound, wire.CodeNotFound, "no such order")
	errSoldOut = example("sold-out", "No unit is left", http.StatusConflict, wire.CodeSoldOut,
		"the sale is sold out")
	errNotStarted = example("not-started", "The sale has not opened yet", http.StatusConflict, wire.CodeNotStarted,
		"the sale has not started yet")
	errEnded = example("ended", "The sale has ended (or was cancelled)", http.StatusConflict, wire.CodeEnded,
		"the sale has ended")
	errAlreadyPurchased = func() problemExample {
		e := example("already-purchased", "The buyer already holds a unit of this sale: `order_id` is their order",
			http.StatusConflict, wire.CodeAlreadyPurchased, "you already hold a unit of this sale")
		e.p.OrderID = "7262577203974242304"
		return e
	}()
	errPayRefused = func() problemExample {
		e := example("expired", "The order's state does not allow it: `order_status` is its actual status",
			http.StatusConflict, wire.CodeInvalidState, "cannot pay: the order is EXPIRED")
		e.p.OrderStatus = domain.StatusExpired
		return e
	}()
	errCancelRefused = func() problemExample {
		e := example("paid", "The order's state does not allow it: `order_status` is its actual status",
			http.StatusConflict, wire.CodeInvalidState, "cannot cancel: the order is PAID")
		e.p.OrderStatus = domain.StatusPaid
		return e
	}()
	errNoOrderAdmin  = example("no-such-order", "No order has this id", http.StatusNotFound, wire.CodeNotFound, "no such order")
	errRefundRefused = func() problemExample {
		e := example("not-paid", "Only a PAID order can be refunded (or the provider refused the refund): `order_status` is its actual status",
			http.StatusConflict, wire.CodeInvalidState, "cannot refund: the order is EXPIRED; only a PAID order can be refunded")
		e.p.OrderStatus = domain.StatusExpired
		return e
	}()
	errTooLarge = example("too-large", "The body exceeds the operation's limit", http.StatusRequestEntityTooLarge, wire.CodeTooLarge,
		"request body is too large")
	errNotJSON = example("not-json", "The body is not sent as JSON: send Content-Type: application/json", http.StatusUnsupportedMediaType,
		wire.CodeBadRequest, "unsupported content type: send the body as application/json")
	errInvalid = func() problemExample {
		e := example("validation-failed", "A parameter or a field of the body is invalid", http.StatusUnprocessableEntity, wire.CodeValidation,
			"validation failed")
		e.p.Errors = []*huma.ErrorDetail{{Location: "path.id", Message: "expected string to match pattern ^[0-9]+$", Value: "abc"}}
		return e
	}()
	errRateLimited = func() problemExample {
		e := example("rate-limited", "Too many purchases from this buyer, address or for this sale: retry after `Retry-After` seconds",
			http.StatusTooManyRequests, wire.CodeRateLimited, "too many requests; retry after 1s")
		e.header = "Retry-After"
		return e
	}()
	errUnavailable = example("unavailable", "A backing service (Redis, the database, Temporal) is unavailable; nothing was changed",
		http.StatusServiceUnavailable, wire.CodeUnavailable, "a backing service is unavailable; nothing was changed")
	errOverloaded = func() problemExample {
		e := example("overloaded", "Too many purchases in flight on this instance: retry after `Retry-After` seconds",
			http.StatusServiceUnavailable, wire.CodeUnavailable, "overloaded; retry in a second")
		e.header = "Retry-After"
		return e
	}()
	errUnconfirmed = func() problemExample {
		e := example("unconfirmed", "The purchase may or may not have been taken (Redis did not answer, or no replica confirmed it in time, "+
			"so a failover could lose it): retry after `Retry-After` seconds with the same `Idempotency-Key`, which answers 202 with `order_id` "+
			"if the unit is held, or admits the buyer anew if it was lost",
			http.StatusServiceUnavailable, wire.CodeUnconfirmed,
			"the purchase was not confirmed: it may or may not have been taken; retry with the same Idempotency-Key to learn which")
		e.p.OrderID = "7262577203974242304"
		e.header = "Retry-After"
		return e
	}()
	errNotConfirmed = example("not-confirmed", "The order's workflow did not confirm in time: the change may still happen, so read the order before retrying",
		http.StatusServiceUnavailable, wire.CodeUnavailable,
		"the order's workflow did not confirm the request in time; it may still take effect, so read the order before retrying")
	errPaymentUnavailable = func() problemExample {
		e := example("payment-unavailable", "The payment provider could not be reached to start the payment; nothing was changed: retry after `Retry-After` seconds",
			http.StatusServiceUnavailable, wire.CodeUnavailable, "the payment provider could not be reached to start the payment; nothing was changed")
		e.header = "Retry-After"
		return e
	}()
	errBadSignature = example("bad-signature", "The notification's signature does not verify (or is missing): nothing was changed",
		http.StatusUnauthorized, wire.CodeUnauthorized, "the notification's signature does not verify")
	errStaleNotification = example("stale", "The notification was signed too long ago (a replay), or is malformed: nothing was changed",
		http.StatusBadRequest, wire.CodeBadRequest, "the notification was signed too long ago")
	errNoProvider = example("no-such-provider", "No payment provider of this name is configured", http.StatusNotFound, wire.CodeNotFound,
		"no payment provider \"paypal\" is configured")
	errInternal = example("internal", "An unexpected error (logged by the server)", http.StatusInternalServerError, wire.CodeInternal,
		"internal error")
)

// retryAfter documents the Retry-After header of 429 and 503 answers.
var retryAfter = &huma.Header{
	Description: "Seconds to wait before retrying.",
	Schema:      &huma.Schema{Type: huma.TypeInteger, Minimum: ptr(1.0)},
}

func ptr[T any](v T) *T { return &v }

var reflectProblem = reflect.TypeFor[wire.Problem]()

// problems documents the problems an operation answers: one response per
// status, each with its examples. Every operation may also fail with an
// internal error, which is added here.
func (s *Server) problems(examples ...problemExample) map[string]*huma.Response {
	schema := s.api.OpenAPI().Components.Schemas.Schema(reflectProblem, true, "Problem")
	examples = append(examples, errInternal)
	byStatus := map[int][]problemExample{}
	for _, e := range examples {
		byStatus[e.p.Status] = append(byStatus[e.p.Status], e)
	}
	out := map[string]*huma.Response{}
	for status, list := range byStatus {
		var codes []string
		mt := &huma.MediaType{Schema: schema, Examples: map[string]*huma.Example{}}
		r := &huma.Response{Content: map[string]*huma.MediaType{"application/problem+json": mt}}
		for _, e := range list {
			if !slices.Contains(codes, e.p.Code) {
				codes = append(codes, e.p.Code)
			}
			mt.Examples[e.name] = &huma.Example{Summary: e.summary, Value: e.p}
			if e.header != "" {
				if r.Headers == nil {
					r.Headers = map[string]*huma.Param{}
				}
				r.Headers[e.header] = retryAfter
			}
		}
		r.Description = http.StatusText(status) + ": " + strings.Join(codes, ", ") + "."
		out[strconv.Itoa(status)] = r
	}
	return out
}

// parseID reads an id from a path: digits, like the ids in bodies (the
// schema's pattern has let only digits through), of a positive 64-bit
// integer. Anything else is invalid input (422), as a malformed number
// always was.
func parseID(raw string) (int64, error) {
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 1 {
		return 0, huma.Error422UnprocessableEntity("validation failed", &huma.ErrorDetail{
			Location: "path.id", Message: "expected a positive 64-bit integer in decimal digits", Value: raw,
		})
	}
	return id, nil
}
