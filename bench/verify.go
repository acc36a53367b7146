package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/client"
)

// Accepted is a purchase answered 202: the order its buyer was told of.
// A run writes them with Options.AcceptedOut, so that a loss can be looked
// for after an --admission-only run too (`seckill bench --verify FILE`).
type Accepted struct {
	SaleID  string `json:"sale_id"`
	OrderID string `json:"order_id"`
	UserID  string `json:"user_id"`
}

// Lost is what VerifyAccepted found: how many accepted orders the api does
// not know (404 to their own buyer), and up to ten of their ids.
type Lost struct {
	Checked int      `json:"checked"`
	Lost    int      `json:"lost"`
	Sample  []string `json:"sample,omitempty"`
}

// VerifyAccepted reads every accepted order as its own buyer (a token
// minted with signer), concurrency at a time. An order the api answers for
// is there, whatever its status (PENDING while its intent waits in line);
// a 404 is a lost 202: the buyer was told they won and there is no order.
// Any other failure, retried a few times, is an error: the check could
// not be made.
func VerifyAccepted(ctx context.Context, target string, signer *auth.Signer, list []Accepted, concurrency int) (Lost, error) {
	api := newTarget(target, concurrency).api
	var (
		mu    sync.Mutex
		lost  Lost
		errs  []error
		wg    sync.WaitGroup
		queue = make(chan Accepted)
	)
	for range max(1, concurrency) {
		wg.Go(func() {
			for a := range queue {
				gone, err := orderGone(ctx, api, signer, a)
				mu.Lock()
				lost.Checked++
				switch {
				case err != nil:
					if len(errs) < 5 {
						errs = append(errs, err)
					}
				case gone:
					lost.Lost++
					lost.Sample = append(lost.Sample, a.OrderID)
				}
				mu.Unlock()
			}
		})
	}
	for _, a := range list {
		queue <- a
	}
	close(queue)
	wg.Wait()
	slices.Sort(lost.Sample)
	lost.Sample = lost.Sample[:min(len(lost.Sample), 10)]
	return lost, errors.Join(errs...)
}

// orderGone reports whether the api answers 404 for a's order to its buyer.
func orderGone(ctx context.Context, api *client.Client, signer *auth.Signer, a Accepted) (bool, error) {
	tok, err := signer.Mint(a.UserID, auth.RoleBuyer, time.Hour)
	if err != nil {
		return false, err
	}
	buyer := api.WithToken(tok)
	for attempt := 0; ; attempt++ {
		_, err := buyer.Order(ctx, a.OrderID)
		var refused *client.Error
		switch {
		case err == nil:
			return false, nil
		case errors.As(err, &refused) && refused.StatusCode == http.StatusNotFound:
			return true, nil
		case attempt == 4 || ctx.Err() != nil:
			return false, fmt.Errorf("order %s of %s: %w", a.OrderID, a.UserID, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
		}
	}
}

// WriteAccepted writes list as NDJSON, one accepted purchase a line.
func WriteAccepted(w io.Writer, list []Accepted) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, a := range list {
		if err := enc.Encode(a); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadAccepted reads what WriteAccepted wrote.
func ReadAccepted(r io.Reader) ([]Accepted, error) {
	var out []Accepted
	dec := json.NewDecoder(r)
	for {
		var a Accepted
		err := dec.Decode(&a)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("accepted purchases, entry %d: %w", len(out)+1, err)
		}
		if a.OrderID == "" || a.UserID == "" {
			return nil, fmt.Errorf("accepted purchases, entry %d: no order_id or user_id", len(out)+1)
		}
		out = append(out, a)
	}
}
