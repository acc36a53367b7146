package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const secret = "0123456789abcdef0123456789abcdef"

func signer(t *testing.T) *Signer {
	t.Helper()
	s, err := NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	s := signer(t)
	minted := time.Now()
	tok, err := s.Mint("alice", RoleAdmin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.Verify(tok)
	if err != nil || u.ID != "alice" || !u.Admin() {
		t.Fatalf("verify = %+v, %v", u, err)
	}
	// exp is whole seconds, so Expires may be up to a second early.
	if want := minted.Add(time.Hour); u.Expires.Before(want.Add(-time.Second)) || u.Expires.After(want) {
		t.Fatalf("Expires = %v, want about %v", u.Expires, want)
	}
}

func TestWeakSecretRefused(t *testing.T) {
	if _, err := NewSigner("short"); !errors.Is(err, ErrWeakSecret) {
		t.Fatalf("err = %v, want ErrWeakSecret", err)
	}
}

// hs256 signs arbitrary header and claims, to forge tokens a library would
// not mint.
func hs256(header, claims, key string) string {
	enc := base64.RawURLEncoding
	msg := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(msg))
	return msg + "." + enc.EncodeToString(mac.Sum(nil))
}

func TestRefusedTokens(t *testing.T) {
	s := signer(t)
	now := time.Now()
	other, _ := NewSigner(strings.Repeat("x", 32))
	expired := func() string {
		o := signer(t)
		o.now = func() time.Time { return now.Add(-2 * time.Hour) }
		tok, _ := o.Mint("bob", RoleBuyer, time.Hour)
		return tok
	}()
	future := func() string {
		o := signer(t)
		o.now = func() time.Time { return now.Add(time.Hour) }
		tok, _ := o.Mint("bob", RoleBuyer, time.Hour)
		return tok
	}()
	forged, _ := other.Mint("bob", RoleAdmin, time.Hour)
	valid, _ := s.Mint("bob", RoleBuyer, time.Hour)
	exp := now.Add(time.Hour).Unix()
	claims := func(extra string) string {
		return `{"sub":"bob","role":"admin","iat":` + itoa(now.Unix()) + `,"exp":` + itoa(exp) + extra + `}`
	}
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(claims(""))) + "."
	noExp := hs256(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"bob","role":"admin"}`, secret)
	badRole := hs256(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"bob","role":"root","exp":`+itoa(exp)+`}`, secret)
	noSub := hs256(`{"alg":"HS256","typ":"JWT"}`, `{"role":"buyer","exp":`+itoa(exp)+`}`, secret)
	hs512 := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"sub": "bob", "role": "admin", "exp": exp})
	hs512tok, _ := hs512.SignedString([]byte(secret))
	tampered := valid[:len(valid)-2] + "AA"
	if strings.HasSuffix(valid, "AA") {
		tampered = valid[:len(valid)-2] + "BB"
	}

	for name, tok := range map[string]string{
		"expired":         expired,
		"not yet valid":   future,
		"other secret":    forged,
		"alg none":        none,
		"no exp":          noExp,
		"unknown role":    badRole,
		"no subject":      noSub,
		"HS512 not HS256": hs512tok,
		"tampered":        tampered,
		"garbage":         "not.a.token",
		"empty":           "",
		"huge":            strings.Repeat("a", 10000),
	} {
		if _, err := s.Verify(tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: err = %v, want ErrInvalidToken", name, err)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func FuzzVerify(f *testing.F) {
	s, _ := NewSigner(secret)
	// Minted at a fixed instant: the fuzzing engine runs this setup again
	// in each worker process, and a token minted at time.Now would differ
	// from the coordinator's seed whenever the second had turned between
	// them, so a worker would meet a valid token it did not mint (a CI
	// failure of 2026-11-25).
	s.now = func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	valid, _ := s.Mint("carol", RoleBuyer, 100*365*24*time.Hour)
	s.now = time.Now
	f.Add(valid)
	f.Add("")
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")
	f.Fuzz(func(t *testing.T, tok string) {
		u, err := s.Verify(tok)
		if err == nil && (u.ID == "" || (u.Role != RoleBuyer && u.Role != RoleAdmin)) {
			t.Fatalf("accepted a token with user %+v", u)
		}
		if err == nil && tok != valid {
			// Only tokens signed with the secret verify; the fuzzer
			// cannot find a new valid HMAC.
			t.Fatalf("accepted a token that was not minted: %q", tok)
		}
	})
}

// BenchmarkVerify is what a purchase pays to check its bearer token (HS256
// and the claims): the figure behind not caching verified tokens
// (docs/performance.md, "Levers").
func BenchmarkVerify(b *testing.B) {
	s, err := NewSigner(strings.Repeat("k", MinSecretBytes))
	if err != nil {
		b.Fatal(err)
	}
	tok, err := s.Mint("buyer-1", RoleBuyer, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}
