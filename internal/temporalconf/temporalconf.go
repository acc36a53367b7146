// Package temporalconf turns the Temporal connection flags of seckill's
// commands into the SDK's client options: plain for a local server, TLS
// (with the system's roots or a CA of its own, and a server name), mTLS
// with a client certificate, and an API key, as Temporal Cloud asks; and
// whether the calls are compressed. It lives apart from the commands so
// that CI tests it.
package temporalconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"go.temporal.io/sdk/client"
)

// Settings are how a process reaches Temporal besides its address.
type Settings struct {
	// TLS is "on", "off" or "auto" (""): auto is on when a CA, a client
	// certificate or an API key is given, off otherwise.
	TLS string
	// CAFile verifies the server (PEM); empty: the system's roots.
	CAFile string
	// CertFile and KeyFile are the client certificate of mTLS (PEM).
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must carry; empty:
	// the host of the address.
	ServerName string
	// APIKey is sent as "Authorization: Bearer <key>" on every call.
	APIKey string
	// Compression is "none" (""), or "gzip": each call's messages
	// compressed, and the server's answers with them. The SDK's own default
	// is gzip; seckill's messages are a few hundred bytes, which gzip
	// hardly shrinks, and on a pay it cost the Temporal frontend about a
	// tenth of its CPU and the worker and the api 7-8 % of theirs
	// (docs/performance.md, "Lever 9"). gzip saves bandwidth to a server
	// far away.
	Compression string
}

// Apply sets o's connection options and credentials.
func (s Settings) Apply(o *client.Options) error {
	if (s.CertFile == "") != (s.KeyFile == "") {
		return errors.New("temporal: a client certificate needs both --temporal-tls-cert and --temporal-tls-key")
	}
	on := false
	switch s.TLS {
	case "on":
		on = true
	case "off":
		if s.CAFile != "" || s.CertFile != "" || s.ServerName != "" {
			return errors.New("temporal: --temporal-tls=off with TLS files or a server name given")
		}
	case "", "auto":
		on = s.CAFile != "" || s.CertFile != "" || s.APIKey != ""
	default:
		return fmt.Errorf("temporal: --temporal-tls must be on, off or auto, not %q", s.TLS)
	}
	if on {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return fmt.Errorf("temporal: CA: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return fmt.Errorf("temporal: CA %s holds no PEM certificate", s.CAFile)
			}
		}
		if s.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
			if err != nil {
				return fmt.Errorf("temporal: client certificate: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		o.ConnectionOptions.TLS = cfg
	} else {
		// An API key over a plain connection (a local server behind an
		// authorizer): the SDK would otherwise turn TLS on by itself.
		o.ConnectionOptions.TLSDisabled = true
	}
	if s.APIKey != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(s.APIKey)
	}
	switch s.Compression {
	case "", "none":
		o.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	case "gzip":
		o.ConnectionOptions.GrpcCompression = &client.GrpcCompressionGzip{}
	default:
		return fmt.Errorf("temporal: --temporal-compression must be none or gzip, not %q", s.Compression)
	}
	return nil
}
