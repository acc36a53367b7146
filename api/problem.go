package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/api/wire"
	"github.com/seckill/seckill/domain"
	"github.com/seckill/seckill/orders"
)

var codeByStatus = map[int]string{
	http.StatusBadRequest:            wire.CodeBadRequest,
	http.StatusUnauthorized:          wire.CodeUnauthorized,
	http.StatusForbidden:             wire.CodeForbidden,
	http.StatusNotFound:              wire.CodeNotFound,
	http.StatusConflict:              wire.CodeInvalidState,
	http.StatusRequestEntityTooLarge: wire.CodeTooLarge,
	http.StatusUnprocessableEntity:   wire.CodeValidation,
	http.StatusTooManyRequests:       wire.CodeRateLimited,
	http.StatusServiceUnavailable:    wire.CodeUnavailable,
}

func init() {
	// Every error huma writes (validation, body size, our own) becomes a
	// Problem with a code.
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		details := make([]*huma.ErrorDetail, 0, len(errs))
		for _, err := range errs {
			if err == nil {
				continue
			}
			if d, ok := err.(huma.ErrorDetailer); ok {
				details = append(details, d.ErrorDetail())
			} else {
				details = append(details, &huma.ErrorDetail{Message: err.Error()})
			}
		}
		code, ok := codeByStatus[status]
		if !ok {
			code = wire.CodeInternal
			if status < 500 {
				code = wire.CodeBadRequest
			}
		}
		return &wire.Problem{
			ErrorModel: huma.ErrorModel{Status: status, Title: http.StatusText(status), Detail: msg, Errors: details},
			Code:       code,
		}
	}
}

func problem(status int, code, detail string) *wire.Problem {
	p := huma.NewError(status, detail).(*wire.Problem)
	p.Code = code
	return p
}

// rateLimited is a 429 with Retry-After.
func rateLimited(retry time.Duration) error {
	return huma.ErrorWithHeaders(rateLimitedProblem(retry),
		http.Header{"Retry-After": {strconv.Itoa(retrySeconds(retry))}})
}

func rateLimitedProblem(retry time.Duration) *wire.Problem {
	return problem(http.StatusTooManyRequests, wire.CodeRateLimited, "too many requests; retry after "+strconv.Itoa(retrySeconds(retry))+"s")
}

func retrySeconds(retry time.Duration) int { return max(1, int(retry.Round(time.Second)/time.Second)) }

// toHTTP maps the outcome of a business call to the HTTP answer, logging
// what the caller must not see.
func toHTTP(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var (
		written huma.StatusError
		limited *domain.RateLimitedError
	)
	switch {
	case errors.As(err, &written):
		return err // an HTTP answer already
	case errors.As(err, &limited):
		return rateLimited(limited.RetryAfter)
	}
	p := problemFor(err)
	if p.Code == wire.CodeUnconfirmed {
		// Logged where it happened; the buyer retries in a second with
		// the same Idempotency-Key.
		return huma.ErrorWithHeaders(p, http.Header{"Retry-After": {"1"}})
	}
	if errors.Is(err, orders.ErrPaymentUnavailable) {
		// Logged where it happened; the provider may be back in a moment.
		return huma.ErrorWithHeaders(p, http.Header{"Retry-After": {"2"}})
	}
	switch {
	case errors.Is(err, orders.ErrNotConfirmed), errors.Is(err, orders.ErrRepairPending), errors.Is(err, orders.ErrPaymentRejected):
		// Logged where it happened, with the order.
	case p.Status == http.StatusServiceUnavailable:
		slog.WarnContext(ctx, "backing service unavailable", "err", err)
	case p.Status >= 500:
		// Internal details (SQL, addresses) stay in the log.
		slog.ErrorContext(ctx, "request failed", "err", err)
	}
	return p
}

// problemFor is the one place where business errors meet status codes.
func problemFor(err error) *wire.Problem {
	var (
		already *domain.AlreadyPurchasedError
		state   *domain.StateError
		limited *domain.RateLimitedError
		written *wire.Problem
	)
	switch {
	case errors.As(err, &written):
		return written
	case errors.As(err, &already):
		p := problem(http.StatusConflict, wire.CodeAlreadyPurchased, "you already hold a unit of this sale")
		p.OrderID = strconv.FormatInt(already.OrderID, 10)
		return p
	case errors.Is(err, domain.ErrSoldOut):
		return problem(http.StatusConflict, wire.CodeSoldOut, "the sale is sold out")
	case errors.Is(err, domain.ErrNotStarted):
		return problem(http.StatusConflict, wire.CodeNotStarted, "the sale has not started yet")
	case errors.Is(err, domain.ErrEnded):
		return problem(http.StatusConflict, wire.CodeEnded, "the sale has ended")
	case errors.Is(err, domain.ErrUnknownSale):
		return problem(http.StatusNotFound, wire.CodeNotFound, "no such sale")
	case errors.Is(err, domain.ErrNotFound):
		return problem(http.StatusNotFound, wire.CodeNotFound, "no such order")
	case errors.As(err, &state):
		p := problem(http.StatusConflict, wire.CodeInvalidState, state.Detail)
		p.OrderStatus = state.Status
		return p
	case errors.Is(err, domain.ErrConflict):
		return problem(http.StatusConflict, wire.CodeInvalidState, "the order's status does not allow this")
	case errors.As(err, &limited):
		return rateLimitedProblem(limited.RetryAfter)
	case errors.Is(err, orders.ErrNotConfirmed):
		return problem(http.StatusServiceUnavailable, wire.CodeUnavailable,
			"the order's workflow did not confirm the request in time; it may still take effect, so read the order before retrying")
	case errors.Is(err, orders.ErrUnconfirmed):
		p := problem(http.StatusServiceUnavailable, wire.CodeUnconfirmed,
			"the purchase was not confirmed: it may or may not have been taken; retry with the same Idempotency-Key to learn which")
		var unconfirmed *orders.UnconfirmedError
		if errors.As(err, &unconfirmed) && unconfirmed.OrderID != 0 {
			p.OrderID = strconv.FormatInt(unconfirmed.OrderID, 10)
		}
		if unconfirmed != nil && unconfirmed.Held {
			p.Detail = "you may already hold a unit of this sale (order_id), but no replica has confirmed it yet: " +
				"it may or may not survive a failover; retry to learn which (409 once confirmed, 202 with a new order if it was lost)"
		}
		return p
	case errors.Is(err, orders.ErrPaymentUnavailable):
		return problem(http.StatusServiceUnavailable, wire.CodeUnavailable,
			"the payment provider could not be reached to start the payment; nothing was changed")
	case errors.Is(err, orders.ErrPaymentRejected):
		return problem(http.StatusServiceUnavailable, wire.CodeUnavailable,
			"the payment provider refused to start the payment; nothing was changed")
	case errors.Is(err, orders.ErrRepairPending):
		return problem(http.StatusServiceUnavailable, wire.CodeUnavailable,
			"the order's workflow was stopped before the order ended; it is being ended now and nothing was changed: read the order in a moment")
	case errors.Is(err, domain.ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return problem(http.StatusServiceUnavailable, wire.CodeUnavailable, "a backing service is unavailable; nothing was changed")
	}
	return problem(http.StatusInternalServerError, wire.CodeInternal, "internal error")
}

// writeProblem writes p outside huma (the websocket handshake).
func writeProblem(w http.ResponseWriter, p *wire.Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// unavailable wraps an infrastructure error so toHTTP answers 503.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	return errors.Join(domain.ErrUnavailable, err)
}
