// Package auth issues and checks seckill's bearer tokens: JWTs signed with
// HS256, claims sub (the user id) and role (buyer or admin), issuer
// "seckill" and audience "seckill-api", and a header kid naming the secret
// that signed them, so that a secret can be rotated without logging
// everyone out (docs/design.md, "Authentication").
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Roles.
const (
	RoleBuyer = "buyer"
	RoleAdmin = "admin"
)

// Issuer and Audience are the iss and aud of every token: a token minted
// for something else with the same secret (a shared secret is a mistake
// operators make) is not one of ours.
const (
	Issuer   = "seckill"
	Audience = "seckill-api"
)

// MinSecretBytes is the shortest secret accepted: HS256 is only as strong
// as its key.
const MinSecretBytes = 32

// MaxTTL is the longest a token of role may live: a leaked token cannot be
// revoked (verifying is stateless), so its lifetime is the exposure. An
// admin's is the shorter, since it can cancel sales.
func MaxTTL(role string) time.Duration {
	if role == RoleAdmin {
		return 12 * time.Hour
	}
	return 24 * time.Hour
}

// Claims are what a token says.
type Claims struct {
	Role string `json:"role"`
	jwt.RegisteredClaims
}

// User is an authenticated caller.
type User struct {
	ID   string
	Role string
	// Expires is the token's exp claim (whole seconds): what outlives the
	// request that presented the token, a websocket, ends then. Verify's
	// leeway for clock skew is not added.
	Expires time.Time
}

// Admin reports whether the user may operate sales.
func (u User) Admin() bool { return u.Role == RoleAdmin }

// Signer mints tokens with its current secret and verifies those of the
// current and, during a rotation, of the previous secrets, each found by
// the kid of the token's header.
type Signer struct {
	kid    string            // the current secret's
	keys   map[string][]byte // kid -> secret, current and previous
	now    func() time.Time
	parser *jwt.Parser
}

// ErrWeakSecret is returned for a secret shorter than MinSecretBytes.
var ErrWeakSecret = fmt.Errorf("the JWT secret must be at least %d bytes", MinSecretBytes)

// KeyID names a secret in the kid header of the tokens it signs. It is
// derived from the secret, so a rotation needs no other setting, and
// through an HMAC under a fixed label, so it says nothing usable about
// the secret.
func KeyID(secret string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("seckill token key id"))
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

// NewSigner returns a Signer that mints with secret and also accepts the
// tokens of previous secrets (those of a rotation under way), refusing a
// weak secret.
func NewSigner(secret string, previous ...string) (*Signer, error) {
	s := &Signer{kid: KeyID(secret), keys: map[string][]byte{}, now: time.Now}
	for i, k := range append([]string{secret}, previous...) {
		if len(k) < MinSecretBytes {
			if i > 0 {
				return nil, fmt.Errorf("previous secret: %w", ErrWeakSecret)
			}
			return nil, ErrWeakSecret
		}
		if _, dup := s.keys[KeyID(k)]; dup {
			return nil, errors.New("the previous JWT secret is the current one: drop it, or give the new secret")
		}
		s.keys[KeyID(k)] = []byte(k)
	}
	s.parser = jwt.NewParser(
		// Pinning the algorithm rejects alg=none and the RS/HS confusion
		// (a public key used as an HMAC secret).
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithIssuer(Issuer),
		jwt.WithAudience(Audience),
		jwt.WithLeeway(5*time.Second),
		jwt.WithTimeFunc(func() time.Time { return s.now() }),
		// One token, one spelling: non-canonical base64 (other trailing
		// bits that decode to the same bytes) is refused.
		jwt.WithStrictDecoding(),
	)
	return s, nil
}

// RandomSecret returns a fresh secret, for dev mode.
func RandomSecret() string {
	b := make([]byte, MinSecretBytes)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// ErrTTL is returned by Mint for a lifetime over MaxTTL(role).
var ErrTTL = errors.New("token lifetime out of range")

// Mint returns a token for user with role, valid for ttl (at most
// MaxTTL(role); a ttl of 0 or less mints an expired token, which tests
// use).
func (s *Signer) Mint(user, role string, ttl time.Duration) (string, error) {
	if user == "" || len(user) > 128 {
		return "", errors.New("user id must be 1 to 128 characters")
	}
	if role != RoleBuyer && role != RoleAdmin {
		return "", fmt.Errorf("role must be %s or %s", RoleBuyer, RoleAdmin)
	}
	if ttl > MaxTTL(role) {
		return "", fmt.Errorf("%w: %v for a token of role %s, which lives at most %v", ErrTTL, ttl, role, MaxTTL(role))
	}
	now := s.now()
	claims := Claims{Role: role, RegisteredClaims: jwt.RegisteredClaims{
		Issuer:    Issuer,
		Audience:  jwt.ClaimStrings{Audience},
		Subject:   user,
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header["kid"] = s.kid
	return tok.SignedString(s.keys[s.kid])
}

// ErrInvalidToken covers every reason a token is refused; the reason is
// wrapped for logs but never shown to the caller.
var ErrInvalidToken = errors.New("invalid or expired token")

// Verify checks a token and returns its user.
func (s *Signer) Verify(token string) (User, error) {
	if len(token) > 4096 {
		return User{}, fmt.Errorf("%w: too long", ErrInvalidToken)
	}
	var c Claims
	_, err := s.parser.ParseWithClaims(token, &c, s.key)
	if err != nil {
		return User{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if c.Subject == "" || len(c.Subject) > 128 {
		return User{}, fmt.Errorf("%w: bad subject", ErrInvalidToken)
	}
	if c.Role != RoleBuyer && c.Role != RoleAdmin {
		return User{}, fmt.Errorf("%w: bad role", ErrInvalidToken)
	}
	// The bound holds for tokens as well as for Mint: one minted by
	// anything else that holds the secret lives no longer either.
	if c.IssuedAt == nil || c.ExpiresAt.Sub(c.IssuedAt.Time) > MaxTTL(c.Role) {
		return User{}, fmt.Errorf("%w: lifetime over %v", ErrInvalidToken, MaxTTL(c.Role))
	}
	return User{ID: c.Subject, Role: c.Role, Expires: c.ExpiresAt.Time}, nil
}

// errUnknownKey refuses a token whose kid names no secret of the Signer.
var errUnknownKey = errors.New("unknown key id")

// key is the secret of the token's kid. A token without one (minted
// before kids, or forged) is refused: there is no secret to guess.
func (s *Signer) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	k, ok := s.keys[kid]
	if !ok {
		return nil, fmt.Errorf("%w %q", errUnknownKey, kid)
	}
	return k, nil
}
