package main

import (
	"fmt"
	"time"

	"github.com/seckill/seckill/auth"
)

// TokenCmd prints a bearer token signed with the configured secret.
type TokenCmd struct {
	AuthFlags
	User string        `name:"user" required:"" help:"User id (the token's sub)."`
	Role string        `name:"role" default:"buyer" enum:"buyer,admin" help:"Role (${enum})."`
	TTL  time.Duration `name:"ttl" default:"1h" help:"How long the token is valid: at most 24h for a buyer, 12h for an admin (a token cannot be revoked)."`
}

func (c *TokenCmd) Run() error {
	if max := auth.MaxTTL(c.Role); c.TTL <= 0 || c.TTL > max {
		return &exitError{code: 2, err: fmt.Errorf("--ttl %v: a token of role %s lives more than 0 and at most %v", c.TTL, c.Role, max)}
	}
	s, err := c.clientSigner()
	if err != nil {
		return err
	}
	tok, err := s.Mint(c.User, c.Role, c.TTL)
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}
