package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/auth"
)

// DevToken is a token minted by dev mode.
type DevToken struct {
	Token  string `json:"token" doc:"A bearer token, valid for 24 hours (a buyer's) or 12 hours (an admin's): the longest seckill mints."`
	UserID string `json:"user_id"`
	Role   string `json:"role" enum:"buyer,admin"`
}

// DevTokenBody asks dev mode for a token.
type DevTokenBody struct {
	UserID string `json:"user_id" minLength:"1" maxLength:"128" pattern:"^[A-Za-z0-9._@-]+$" doc:"Whom the token is for."`
	Role   string `json:"role,omitempty" enum:"buyer,admin" default:"buyer"`
}

// registerDevTokens adds POST /v1/dev/token: anyone may become anyone. It
// exists only in dev mode, for the demo page's "new buyer" button.
func (s *Server) registerDevTokens() {
	huma.Register(s.api, huma.Operation{
		OperationID: "dev-token", Method: http.MethodPost, Path: "/v1/dev/token",
		Summary: "Mint a token for anyone (dev mode only)", Tags: []string{"dev"}, MaxBodyBytes: 1 << 10,
		Description: "Exists only in dev mode (`seckill dev`), for the demo page; a production deployment has no such operation.",
		Security:    public,
		Responses:   s.problems(errMalformed, errTooLarge, errNotJSON, errInvalid),
	}, func(ctx context.Context, in *struct{ Body DevTokenBody }) (*struct{ Body DevToken }, error) {
		role := in.Body.Role
		if role == "" {
			role = auth.RoleBuyer
		}
		tok, err := s.deps.Signer.Mint(in.Body.UserID, role, auth.MaxTTL(role))
		if err != nil {
			return nil, huma.Error422UnprocessableEntity(err.Error())
		}
		return &struct{ Body DevToken }{DevToken{Token: tok, UserID: in.Body.UserID, Role: role}}, nil
	})
}
