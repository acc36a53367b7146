// Package auth issues and checks seckill's bearer tokens: JWTs signed with
// HS256, claims sub (the user id) and role (buyer or admin).
package auth

import (
	"crypto/rand"
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

// MinSecretBytes is the shortest secret accepted: HS256 is only as strong
// as its key.
const MinSecretBytes = 32

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

// Signer mints and verifies tokens with one secret.
type Signer struct {
	secret []byte
	now    func() time.Time
	parser *jwt.Parser
}

// ErrWeakSecret is returned for a secret shorter than MinSecretBytes.
var ErrWeakSecret = fmt.Errorf("the JWT secret must be at least %d bytes", MinSecretBytes)

// NewSigner returns a Signer, refusing a weak secret.
func NewSigner(secret string) (*Signer, error) {
	if len(secret) < MinSecretBytes {
		return nil, ErrWeakSecret
	}
	return &Signer{
		secret: []byte(secret),
		now:    time.Now,
		parser: jwt.NewParser(
			// Pinning the algorithm rejects alg=none and the RS/HS
			// confusion (a public key used as an HMAC secret).
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(5*time.Second),
			// One token, one spelling: non-canonical base64 (other trailing
			// bits that decode to the same bytes) is refused.
			jwt.WithStrictDecoding(),
		),
	}, nil
}

// RandomSecret returns a fresh secret, for dev mode.
func RandomSecret() string {
	b := make([]byte, MinSecretBytes)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Mint returns a token for user with role, valid for ttl.
func (s *Signer) Mint(user, role string, ttl time.Duration) (string, error) {
	if user == "" || len(user) > 128 {
		return "", errors.New("user id must be 1 to 128 characters")
	}
	if role != RoleBuyer && role != RoleAdmin {
		return "", fmt.Errorf("role must be %s or %s", RoleBuyer, RoleAdmin)
	}
	now := s.now()
	claims := Claims{Role: role, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   user,
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.secret)
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
	_, err := s.parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return s.secret, nil })
	if err != nil {
		return User{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if c.Subject == "" || len(c.Subject) > 128 {
		return User{}, fmt.Errorf("%w: bad subject", ErrInvalidToken)
	}
	if c.Role != RoleBuyer && c.Role != RoleAdmin {
		return User{}, fmt.Errorf("%w: bad role", ErrInvalidToken)
	}
	return User{ID: c.Subject, Role: c.Role, Expires: c.ExpiresAt.Time}, nil
}
