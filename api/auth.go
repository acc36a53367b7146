package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/seckill/seckill/auth"
)

type (
	userKey struct{}
	ipKey   struct{}
)

var bearer = []map[string][]string{{"bearer": {}}}

// adminOnly marks an operation for admins.
const adminOnly = "admin-only"

// authenticate checks the bearer token of every operation but the public
// ones, and the admin role where required. An operation that declares no
// security at all (nil) needs a token, as the document's global
// requirement says: only an explicit empty requirement (public) opens one.
func (s *Server) authenticate(ctx huma.Context, next func(huma.Context)) {
	ctx = huma.WithValue(ctx, ipKey{}, s.clientIP(ctx.RemoteAddr(), ctx.Header("X-Forwarded-For")))
	op := ctx.Operation()
	if op.Security != nil && len(op.Security) == 0 {
		next(ctx)
		return
	}
	h := ctx.Header("Authorization")
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || token == "" {
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="seckill"`)
		_ = huma.WriteErr(s.api, ctx, http.StatusUnauthorized, "a bearer token is required")
		return
	}
	user, err := s.deps.Signer.Verify(strings.TrimSpace(token))
	if err != nil {
		slog.Debug("token refused", "err", err) // the reason, never the token
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="seckill", error="invalid_token"`)
		_ = huma.WriteErr(s.api, ctx, http.StatusUnauthorized, "invalid or expired token")
		return
	}
	if op.Metadata[adminOnly] == true && !user.Admin() {
		_ = huma.WriteErr(s.api, ctx, http.StatusForbidden, "admins only")
		return
	}
	next(huma.WithValue(ctx, userKey{}, user))
}

// userFrom returns the authenticated caller.
func userFrom(ctx context.Context) auth.User {
	u, _ := ctx.Value(userKey{}).(auth.User)
	return u
}

// clientIP is the caller's address: the connection's peer, or, when the
// peer is a trusted proxy, the last address in X-Forwarded-For that is not
// one (the first ones can be forged by the client).
func (s *Server) clientIP(remoteAddr, forwardedFor string) string {
	peer, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	ip := peer.Addr().Unmap()
	hops := strings.Split(forwardedFor, ",")
	for i := len(hops) - 1; i >= 0 && s.trusted(ip); i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		ip = hop.Unmap()
	}
	return ip.String()
}

func (s *Server) trusted(ip netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ipFrom returns the client address the middleware recorded.
func ipFrom(ctx context.Context) string {
	ip, _ := ctx.Value(ipKey{}).(string)
	return ip
}
