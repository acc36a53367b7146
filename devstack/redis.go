package devstack

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
)

// Redis is an in-process Redis (miniredis) on a free loopback port. It keeps
// nothing across restarts. Stop it with Stop.
type Redis struct{ mr *miniredis.Miniredis }

// StartRedis starts an in-process Redis on 127.0.0.1 and a free port.
func StartRedis() (*Redis, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("devstack: start redis: %w", err)
	}
	return &Redis{mr: mr}, nil
}

// Addr is the host:port clients dial.
func (r *Redis) Addr() string { return r.mr.Addr() }

// Stop closes the server and every connection to it.
func (r *Redis) Stop() { r.mr.Close() }
