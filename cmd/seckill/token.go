package main

import (
	"fmt"
	"time"
)

// TokenCmd prints a bearer token signed with the configured secret.
type TokenCmd struct {
	AuthFlags
	User string        `name:"user" required:"" help:"User id (the token's sub)."`
	Role string        `name:"role" default:"buyer" enum:"buyer,admin" help:"Role (${enum})."`
	TTL  time.Duration `name:"ttl" default:"1h" help:"How long the token is valid."`
}

func (c *TokenCmd) Run() error {
	s, err := c.signer()
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
