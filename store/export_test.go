package store

import (
	"context"

	"github.com/seckill/seckill/domain"
)

// PlaceTx is PlaceOrder through ent, for the tests that compare what the
// function writes with what the transaction writes.
func (s *Store) PlaceTx(ctx context.Context, ref domain.OrderRef) error { return s.placeTx(ctx, ref) }

// MigratePlaceFunction is the part of Migrate that creates the function:
// ent's own migration cannot run twice at once in one process (it sets up
// package-level tables), processes migrating at once can.
func (s *Store) MigratePlaceFunction(ctx context.Context) error { return s.migratePlaceFunction(ctx) }

// PlaceBody is the function's body.
const PlaceBody = placeBody

// PostgresPool is Open's pool size on Postgres.
const PostgresPool = postgresPool
