package temporalconf_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/temporalconf"
	"github.com/seckill/seckill/internal/testenv"
)

func TestSettingsRefuseWhatCannotWork(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]temporalconf.Settings{
		"a certificate without its key": {CertFile: "c.pem"},
		"a key without its certificate": {KeyFile: "k.pem"},
		"TLS off with a CA":             {TLS: "off", CAFile: notPEM},
		"TLS neither on, off nor auto":  {TLS: "yes"},
		"a CA file with no certificate": {CAFile: notPEM},
		"a CA file that is not there":   {CAFile: filepath.Join(dir, "missing.pem")},
	} {
		if err := s.Apply(&client.Options{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	var o client.Options
	if err := (temporalconf.Settings{APIKey: "k"}).Apply(&o); err != nil || o.ConnectionOptions.TLS == nil || o.Credentials == nil {
		t.Errorf("an API key alone: %v, TLS %v, credentials %v; want TLS on (auto) and credentials", err, o.ConnectionOptions.TLS, o.Credentials)
	}
	o = client.Options{}
	if err := (temporalconf.Settings{}).Apply(&o); err != nil || o.ConnectionOptions.TLS != nil || !o.ConnectionOptions.TLSDisabled {
		t.Errorf("nothing given: %v, TLS %v; want a plain connection", err, o.ConnectionOptions.TLS)
	}
	if _, none := o.ConnectionOptions.GrpcCompression.(*client.GrpcCompressionNone); !none {
		t.Errorf("nothing given: compression %T; want none (the SDK's default would be gzip)", o.ConnectionOptions.GrpcCompression)
	}
	o = client.Options{}
	if err := (temporalconf.Settings{Compression: "gzip"}).Apply(&o); err != nil {
		t.Errorf("gzip: %v", err)
	} else if _, gzip := o.ConnectionOptions.GrpcCompression.(*client.GrpcCompressionGzip); !gzip {
		t.Errorf("gzip: compression %T", o.ConnectionOptions.GrpcCompression)
	}
	if err := (temporalconf.Settings{Compression: "zstd"}).Apply(&client.Options{}); err == nil {
		t.Error("compression zstd: accepted")
	}
}

// A server that refuses a namespace's calls without its API key
// (`seckill temporal --api-key`): the key the settings name arrives, a
// wrong or missing one is refused, with the calls compressed or not.
func TestAPIKeyArrives(t *testing.T) {
	tp := testenv.NewTemporal(t)
	tp.Args = []string{"--api-key", "the-right-key"}
	tp.Start()
	for _, c := range []struct {
		key         string
		allowed     bool
		compression string
	}{{"the-right-key", true, "none"}, {"the-right-key", true, "gzip"}, {"a-wrong-key", false, "gzip"}, {"", false, "none"}} {
		err := describeNamespace(t, tp.Address(), temporalconf.Settings{TLS: "off", APIKey: c.key, Compression: c.compression})
		var denied *serviceerror.PermissionDenied
		if c.allowed && err != nil || !c.allowed && !errors.As(err, &denied) {
			t.Errorf("key %q: %v; want allowed=%v (else PermissionDenied)", c.key, err, c.allowed)
		}
	}
}

// mTLS as Temporal Cloud does it, by the embedded server itself
// (`seckill temporal --tls-cert --tls-key --tls-client-ca`, with its API
// key): the settings verify the server's certificate by the CA and the
// server name, present the client certificate, and the key still arrives;
// a client without a certificate, trusting another CA, expecting another
// name or speaking plain gRPC gets nowhere. The server's own clients (the
// namespace setup, the search attributes) went through its internal
// frontend: it became ready.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "seckill test CA")
	ca.write(t, filepath.Join(dir, "ca.pem"))
	ca.issueFiles(t, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"), "temporal.test", x509.ExtKeyUsageServerAuth)
	ca.issueFiles(t, filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key"), "seckill-worker", x509.ExtKeyUsageClientAuth)
	other := newCA(t, "another CA")
	other.write(t, filepath.Join(dir, "other.pem"))
	tp := testenv.NewTemporal(t)
	tp.Args = []string{"--api-key", "k", "--tls-cert", filepath.Join(dir, "server.pem"), "--tls-key", filepath.Join(dir, "server.key"),
		"--tls-client-ca", filepath.Join(dir, "ca.pem")}
	tp.Start()

	good := temporalconf.Settings{CAFile: filepath.Join(dir, "ca.pem"), ServerName: "temporal.test",
		CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client.key"), APIKey: "k"}
	if err := describeNamespace(t, tp.Address(), good); err != nil {
		t.Fatalf("mTLS with the CA, the server name, a client certificate and the key: %v", err)
	}
	noCert := good
	noCert.CertFile, noCert.KeyFile = "", ""
	otherCA := good
	otherCA.CAFile = filepath.Join(dir, "other.pem")
	wrongName := good
	wrongName.ServerName = "elsewhere.test"
	plain := temporalconf.Settings{TLS: "off", APIKey: "k"}
	for name, s := range map[string]temporalconf.Settings{"no client certificate": noCert, "another CA": otherCA,
		"another server name": wrongName, "plain gRPC": plain} {
		if err := describeNamespace(t, tp.Address(), s); err == nil {
			t.Errorf("%s: connected", name)
		}
	}
}

// describeNamespace calls into the namespace as a client with s would.
func describeNamespace(t *testing.T, addr string, s temporalconf.Settings) error {
	t.Helper()
	o := client.Options{HostPort: addr}
	if err := s.Apply(&o); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, o)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	return err
}

// ca is a certificate authority of the test's own.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func newCA(t *testing.T, name string) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &ca{cert: cert, key: key, der: der}
}

func (c *ca) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

// write writes the CA's certificate as PEM to path.
func (c *ca) write(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (c *ca) sign(t *testing.T, name string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func (c *ca) issue(t *testing.T, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	der, key := c.sign(t, name, usage)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (c *ca) issueFiles(t *testing.T, certPath, keyPath, name string, usage x509.ExtKeyUsage) {
	t.Helper()
	der, key := c.sign(t, name, usage)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}
