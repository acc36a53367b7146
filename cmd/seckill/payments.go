package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/auth"
	"github.com/seckill/seckill/payment"
	"github.com/seckill/seckill/payment/builtin"
	"github.com/seckill/seckill/payment/stripe"
	"github.com/seckill/seckill/store"
)

// PaymentFlags choose where orders pay (docs/design.md §4.10): nowhere
// (none: pay decides PAID, as before payments had a provider), the
// built-in provider, or Stripe. The secrets come from the environment; on
// the command line ps would show them, and main warns.
type PaymentFlags struct {
	PaymentProvider         string        `name:"payment-provider" env:"SECKILL_PAYMENT_PROVIDER" enum:"none,builtin,stripe" default:"${payment_provider}" help:"Where orders pay (${enum}): none, pay decides PAID; builtin, the payment service in the binary (under /pay/ of the api); stripe, Stripe's PaymentIntents. Give the api and the worker the same."`
	PaymentRate             float64       `name:"payment-rate" env:"SECKILL_PAYMENT_RATE" default:"80" help:"Calls to the payment provider per second that every worker together may start (starting, cancelling and refunding payments; Temporal's server holds the payment task queue to it). Stripe allows about 100 a second live, fewer in test mode. 0: no limit. Give every worker the same."`
	PaymentGrace            time.Duration `name:"payment-grace" env:"SECKILL_PAYMENT_GRACE" default:"2m" help:"How long past its payment deadline an order holds its unit while the provider cannot be reached to cancel a pending payment."`
	BuiltinPaySecretKey     string        `name:"builtinpay-secret-key" env:"SECKILL_BUILTINPAY_SECRET_KEY" secret:"" help:"With --payment-provider=builtin: the built-in provider's API key (the api serves that API, the worker calls it). Required on serve and worker; dev makes one. Never logged."`
	BuiltinPayWebhookSecret string        `name:"builtinpay-webhook-secret" env:"SECKILL_BUILTINPAY_WEBHOOK_SECRET" secret:"" help:"With --payment-provider=builtin: the secret the built-in provider signs its notifications with. Required on serve and worker; dev makes one. Never logged."`
	BuiltinPayURL           string        `name:"builtinpay-url" env:"SECKILL_BUILTINPAY_URL" help:"With --payment-provider=builtin: the built-in provider's URL, the api's /pay/ (http://api:8080/pay/). Required on the worker; default on serve and dev: their own."`
	StripeSecretKey         string        `name:"stripe-secret-key" env:"STRIPE_SECRET_KEY" secret:"" help:"With --payment-provider=stripe: Stripe's secret API key (sk_…). Never logged."`
	StripeWebhookSecret     string        `name:"stripe-webhook-secret" env:"STRIPE_WEBHOOK_SECRET" secret:"" help:"With --payment-provider=stripe: the signing secret (whsec_…) of the webhook endpoint <public URL>/v1/payments/stripe/notify. Never logged."`
}

// provider is the provider's name in OrderInput.Provider: "" for none.
func (f PaymentFlags) provider() string {
	if f.PaymentProvider == "none" {
		return ""
	}
	return f.PaymentProvider
}

// check refuses a provider whose secrets are missing, naming them.
func (f PaymentFlags) check() error {
	if f.PaymentGrace <= 0 {
		return errors.New("--payment-grace must be positive")
	}
	if f.PaymentRate < 0 {
		return errors.New("--payment-rate must be 0 (no limit) or more")
	}
	var missing []string
	switch f.provider() {
	case builtin.Name:
		if f.BuiltinPaySecretKey == "" {
			missing = append(missing, "SECKILL_BUILTINPAY_SECRET_KEY")
		}
		if f.BuiltinPayWebhookSecret == "" {
			missing = append(missing, "SECKILL_BUILTINPAY_WEBHOOK_SECRET")
		}
	case "stripe":
		if f.StripeSecretKey == "" {
			missing = append(missing, "STRIPE_SECRET_KEY")
		}
		if f.StripeWebhookSecret == "" {
			missing = append(missing, "STRIPE_WEBHOOK_SECRET")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("--payment-provider=%s needs %s in the environment", f.PaymentProvider, strings.Join(missing, " and "))
	}
	return nil
}

// providers returns the configured provider's adapter by name (none: an
// empty map). builtinURL is the built-in provider's URL with its prefix,
// used unless --builtinpay-url gives one.
func (f PaymentFlags) providers(builtinURL string) (map[string]payment.Provider, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	out := map[string]payment.Provider{}
	switch f.provider() {
	case builtin.Name:
		if f.BuiltinPayURL != "" {
			builtinURL = f.BuiltinPayURL
		}
		if builtinURL == "" {
			return nil, errors.New("--payment-provider=builtin needs --builtinpay-url (SECKILL_BUILTINPAY_URL): the api's /pay/, e.g. http://api:8080/pay/")
		}
		c, err := builtin.NewClient(builtin.ClientConfig{BaseURL: builtinURL, SecretKey: f.BuiltinPaySecretKey, WebhookSecret: f.BuiltinPayWebhookSecret})
		if err != nil {
			return nil, fmt.Errorf("--builtinpay-url: %w", err)
		}
		out[builtin.Name] = c
	case "stripe":
		p, err := stripe.New(stripe.Config{SecretKey: f.StripeSecretKey, WebhookSecret: f.StripeWebhookSecret})
		if err != nil {
			return nil, err
		}
		out[p.Name()] = p
	}
	return out, nil
}

// builtinService is the built-in payment service an api mounts under
// api.PayPrefix with --payment-provider=builtin (nil otherwise): its
// hosted page at publicURL, its notifications sent to the api's own
// endpoint there. controls enables its test controls (dev only).
func (f PaymentFlags) builtinService(st *store.Store, publicURL string, controls bool) (*builtin.Service, error) {
	if f.provider() != builtin.Name {
		return nil, nil
	}
	return builtin.New(builtin.Config{
		DB: st.DB(), Prefix: api.PayPrefix, BaseURL: publicURL, SecretKey: f.BuiltinPaySecretKey,
		WebhookURL:    strings.TrimSuffix(publicURL, "/") + "/v1/payments/" + builtin.Name + "/notify",
		WebhookSecret: f.BuiltinPayWebhookSecret, Controls: controls,
		Logger: slog.Default(),
	})
}

// devPaymentSecrets gives dev's built-in provider its secrets unless the
// environment does: made on the first start and kept in the data
// directory, as the token secret is, or random per start with --memory.
func (f *PaymentFlags) devPaymentSecrets(dataDir string, memory bool) error {
	if f.provider() != builtin.Name {
		return nil
	}
	for _, s := range []struct {
		value      *string
		file, what string
	}{
		{&f.BuiltinPaySecretKey, "builtinpay-secret-key", "built-in payments' secret key"},
		{&f.BuiltinPayWebhookSecret, "builtinpay-webhook-secret", "built-in payments' webhook secret"},
	} {
		if *s.value != "" {
			continue
		}
		if memory {
			*s.value = auth.RandomSecret()
			continue
		}
		path, err := devSecretFile(dataDir, s.file, s.what)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("dev's %s: %w", s.what, err)
		}
		*s.value = strings.TrimRight(string(b), "\r\n")
	}
	return nil
}

// publicURL is the api's origin as a browser reaches it: --public-url, or
// the address it listens on (loopback for an unspecified one).
func publicURL(flag, listening string) (string, error) {
	if flag == "" {
		return "http://" + listening, nil
	}
	u, err := url.Parse(flag)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", errors.New("--public-url must be an origin such as https://shop.example.com")
	}
	return strings.TrimSuffix(flag, "/"), nil
}
