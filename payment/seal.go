package payment

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// What the buyer's client needs to pay (a hosted page's URL, a client
// secret) is the capability to pay: Stripe says a client secret must
// reach the buyer alone, and a hosted page's URL lets whoever holds it
// pay or decline. The order's workflow hands it to the buyer through its
// history (the StartPayment activity's result, the pay update's answer),
// which everyone with Web UI access reads. So it travels there sealed
// (docs/design.md §4.10): the activity seals it, the workflow passes the
// blob on untouched, and only the api opens it to answer the buyer.

// ClientAction is what the buyer's client needs to complete a payment at
// its provider: one of the two.
type ClientAction struct {
	RedirectURL  string `json:"redirect_url,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
}

// Of is p's client action.
func Of(p Payment) ClientAction {
	return ClientAction{RedirectURL: p.RedirectURL, ClientSecret: p.ClientSecret}
}

// Empty reports whether a carries nothing.
func (a ClientAction) Empty() bool { return a.RedirectURL == "" && a.ClientSecret == "" }

// WithoutClientAction is p with neither its client action nor its seal:
// what a workflow keeps of a payment it did not start or a read it made,
// none of which it hands to a buyer.
func (p Payment) WithoutClientAction() Payment {
	p.RedirectURL, p.ClientSecret, p.SealedAction = "", "", ""
	return p
}

// sealV1 prefixes a blob of the first format: base64url (no padding) of
// a random 12-byte nonce and the AES-256-GCM ciphertext of the action's
// JSON (cipher.NewGCMWithRandomNonce's layout), under a key HKDF-SHA256
// derives from the provider's secret key, with the format, the provider,
// the order and the payment as associated data. A later format gets a
// prefix of its own; Open refuses one it does not know.
const sealV1 = "v1."

// ErrUnsealable: a sealed client action that does not open with this
// sealer's key for this order and payment: sealed under another key (the
// provider's secret key was rotated), for another order or payment,
// altered, or of a format this version does not know.
var ErrUnsealable = errors.New("sealed client action does not open")

// Sealer seals and opens the client actions of one provider's payments.
// The api and the worker each make theirs from the same provider secret
// key, so what a worker seals, an api opens.
type Sealer struct {
	provider string
	aead     cipher.AEAD
}

// NewSealer returns the sealer of provider's payments, its key derived
// from the provider's secret key (its API key): whoever holds that key
// can read the client action from the provider anyway, so deriving from
// it gives away nothing the key does not, and needs no secret of its own.
func NewSealer(provider, secretKey string) (*Sealer, error) {
	if secretKey == "" {
		return nil, errors.New("payment sealer: no secret key")
	}
	key, err := hkdf.Key(sha256.New, []byte(secretKey), nil, "seckill payment client action seal v1 "+provider, 32)
	if err != nil {
		return nil, fmt.Errorf("payment sealer: derive the key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("payment sealer: %w", err)
	}
	// The nonce is random per seal and travels with the blob.
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("payment sealer: %w", err)
	}
	return &Sealer{provider: provider, aead: aead}, nil
}

// aad binds a blob to its format, provider, order and payment: a blob
// copied into another order's answer, or another payment's, does not
// open there.
func (s *Sealer) aad(orderID int64, paymentID string) []byte {
	return []byte(sealV1 + "\x00" + s.provider + "\x00" + strconv.FormatInt(orderID, 10) + "\x00" + paymentID)
}

// Seal returns a's blob for payment paymentID of order orderID. A random
// nonce per seal: 2^32 seals under one key keep GCM's bound on nonce
// collisions, far more payments than a provider key lives through.
func (s *Sealer) Seal(orderID int64, paymentID string, a ClientAction) (string, error) {
	plain, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("seal the client action of payment %s: %w", paymentID, err)
	}
	blob := s.aead.Seal(nil, nil, plain, s.aad(orderID, paymentID))
	return sealV1 + base64.RawURLEncoding.EncodeToString(blob), nil
}

// Open returns the client action sealed in blob for payment paymentID of
// order orderID, or ErrUnsealable.
func (s *Sealer) Open(orderID int64, paymentID, blob string) (ClientAction, error) {
	body, ok := strings.CutPrefix(blob, sealV1)
	if !ok {
		return ClientAction{}, fmt.Errorf("%w: unknown format", ErrUnsealable)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return ClientAction{}, fmt.Errorf("%w: malformed", ErrUnsealable)
	}
	plain, err := s.aead.Open(nil, nil, raw, s.aad(orderID, paymentID))
	if err != nil {
		// The one answer for a wrong key, order, payment or an altered
		// blob: GCM cannot tell them apart, and need not.
		return ClientAction{}, ErrUnsealable
	}
	var a ClientAction
	if err := json.Unmarshal(plain, &a); err != nil {
		return ClientAction{}, fmt.Errorf("%w: %w", ErrUnsealable, err)
	}
	return a, nil
}

// SealPayment returns p as the order's history may hold it: its client
// action sealed into SealedAction, the plain fields cleared.
func (s *Sealer) SealPayment(orderID int64, p Payment) (Payment, error) {
	a := Of(p)
	p = p.WithoutClientAction()
	if a.Empty() {
		return p, nil
	}
	blob, err := s.Seal(orderID, p.ID, a)
	if err != nil {
		return Payment{}, err
	}
	p.SealedAction = blob
	return p, nil
}
