package push

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/domain"
)

// Publisher carries order events from whichever process produced them (a
// worker's Notify activity) to whichever api instance holds the buyer's
// websocket, over Redis pub/sub.
type Publisher struct {
	rdb redis.UniversalClient
}

// NewPublisher returns a Publisher over rdb.
func NewPublisher(rdb redis.UniversalClient) *Publisher { return &Publisher{rdb: rdb} }

// Publish sends e to the api instances holding a socket of e.UserID.
// Delivery is at most once: a buyer who is not connected gets the order's
// status in the snapshot sent when they connect.
func (p *Publisher) Publish(ctx context.Context, e domain.Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := p.rdb.Publish(ctx, UserChannel(e.UserID), b).Err(); err != nil {
		return fmt.Errorf("publish order %s event: %w", e.OrderID, err)
	}
	return nil
}
