package devstack

import (
	"context"
	"crypto/subtle"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/primitives"
)

// With TemporalOptions.APIKey the frontend answers a namespace's calls
// only to a caller that presents "Authorization: Bearer <key>", the way
// Temporal Cloud takes an API key: enough to show that seckill's clients
// send theirs. Calls that name no namespace (system info, health) and the
// server's own namespace stay open, so the SDK can connect and the
// server's system workers, which present no key, keep running.

// apiKeyClaims gives a caller that presents the key the admin role, and
// any other caller none.
type apiKeyClaims struct{ bearer string }

func (m apiKeyClaims) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	if info != nil && subtle.ConstantTimeCompare([]byte(info.AuthToken), []byte(m.bearer)) == 1 {
		return &authorization.Claims{Subject: "api-key", System: authorization.RoleAdmin}, nil
	}
	return &authorization.Claims{}, nil
}

// AuthInfoRequired is false: GetClaims runs for callers without any
// authorization too, and gives them no role.
func (apiKeyClaims) AuthInfoRequired() bool { return false }

// apiKeyAuthorizer lets an admin (the key's holder) call anything, and
// anyone call what names no namespace or the server's own.
type apiKeyAuthorizer struct{}

func (apiKeyAuthorizer) Authorize(_ context.Context, c *authorization.Claims, t *authorization.CallTarget) (authorization.Result, error) {
	if (c != nil && c.System&authorization.RoleAdmin != 0) || t.Namespace == "" || t.Namespace == primitives.SystemLocalNamespace {
		return authorization.Result{Decision: authorization.DecisionAllow}, nil
	}
	return authorization.Result{Decision: authorization.DecisionDeny, Reason: "this server requires an API key"}, nil
}

// authOptions are the server's authorizer and claim mapper: none without
// an API key (a dev server has no auth), the key's with one.
func authOptions(apiKey string) (authorization.Authorizer, func(*config.Config) authorization.ClaimMapper) {
	if apiKey == "" {
		return authorization.NewNoopAuthorizer(), func(*config.Config) authorization.ClaimMapper { return authorization.NewNoopClaimMapper() }
	}
	m := apiKeyClaims{bearer: "Bearer " + apiKey}
	return apiKeyAuthorizer{}, func(*config.Config) authorization.ClaimMapper { return m }
}
