// Package redact keeps the passwords of service URLs (DATABASE_URL,
// REDIS_ADDR, a Temporal Postgres URL, an OTLP endpoint) out of errors and
// log lines. The libraries that parse them quote the whole URL in their
// errors: url.Parse's `parse "postgres://u:PASSWORD@host:bad/db": invalid
// port`, which lib/pq and go-redis return as they are. So every error made
// from such a URL goes through Error, and every URL printed through URL.
package redact

import (
	"net/url"
	"strconv"
	"strings"
)

// Mask replaces a password.
const Mask = "xxxxx"

// URL returns raw with the password of its userinfo and the values of
// password-like query parameters (password, sslpassword,
// sentinel_password, token, secret, ...) masked. It works on strings
// url.Parse refuses too, which are the ones that end up in errors.
func URL(raw string) string {
	return scrub(raw, Passwords(raw))
}

// Error returns err with the passwords of urls masked in its message; nil
// for nil. errors.Is and errors.As still see the original, but its message
// is the masked one.
func Error(err error, urls ...string) error {
	if err == nil {
		return nil
	}
	var pw []string
	for _, u := range urls {
		pw = append(pw, Passwords(u)...)
	}
	msg := err.Error()
	if clean := scrub(msg, pw); clean != msg {
		return &redacted{err: err, msg: clean}
	}
	return err
}

type redacted struct {
	err error
	msg string
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Passwords returns the secrets in raw, in each spelling an error may
// quote them in: as written (percent-encoded), decoded, and escaped as Go
// quotes strings (url.Parse's errors use %q).
func Passwords(raw string) []string {
	var found []string
	add := func(s string) {
		if s == "" {
			return
		}
		for _, v := range []string{s, unescape(s)} {
			found = append(found, v, strings.Trim(strconv.Quote(v), `"`))
		}
	}
	userinfo, query := split(raw)
	if _, pw, ok := strings.Cut(userinfo, ":"); ok {
		add(pw)
	}
	for _, kv := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, ok := strings.Cut(kv, "=")
		if ok && sensitive(k) {
			add(v)
		}
	}
	return dedupe(found)
}

// split returns the userinfo and the query of raw. url.Parse decides
// where it can; a URL it refuses is cut by hand, generously: the userinfo
// runs to the last '@' (a password may hold '/', '?' or '#' unescaped,
// which is often why it was refused).
func split(raw string) (userinfo, query string) {
	if u, err := url.Parse(raw); err == nil {
		if _, ok := u.User.Password(); ok {
			// As written (escaped): the authority runs from "//" to the
			// first '/', '?' or '#', and its userinfo to its last '@'.
			_, rest, _ := strings.Cut(raw, "//")
			if i := strings.IndexAny(rest, "/?#"); i >= 0 {
				rest = rest[:i]
			}
			userinfo = rest[:max(0, strings.LastIndex(rest, "@"))]
		}
		return userinfo, u.RawQuery
	}
	rest := raw
	if _, after, ok := strings.Cut(raw, "://"); ok {
		rest = after
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		userinfo = rest[:i]
		rest = rest[i+1:]
	}
	if _, q, ok := strings.Cut(rest, "?"); ok {
		query = q
	}
	return userinfo, query
}

// sensitive reports whether a query parameter holds a secret.
func sensitive(key string) bool {
	k := strings.ToLower(unescape(key))
	for _, s := range []string{"pass", "pwd", "secret", "token", "apikey", "api_key", "api-key"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// scrub masks each password where a URL has it: after the user and ':'
// and before '@', or as a parameter's value after '='. A short password
// ("1") is masked only there, never as any substring, so the rest of a
// message stays readable; a long one (8 bytes or more) wherever it is.
func scrub(s string, passwords []string) string {
	for _, pw := range passwords {
		if len(pw) >= 8 {
			s = strings.ReplaceAll(s, pw, Mask)
			continue
		}
		s = strings.ReplaceAll(s, ":"+pw+"@", ":"+Mask+"@")
		s = maskValue(s, "="+pw)
	}
	return s
}

// maskValue masks pw in each "=pw" of s that the value ends after (at the
// end, '&', a quote, a space, ...).
func maskValue(s, eqpw string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, eqpw)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(eqpw)
		b.WriteString(s[:i])
		if end == len(s) || strings.ContainsRune("&;\"' #)\n", rune(s[end])) {
			b.WriteString("=" + Mask)
		} else {
			b.WriteString(eqpw)
		}
		s = s[end:]
	}
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
