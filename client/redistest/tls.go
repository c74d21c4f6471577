package redistest

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
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TLSFiles are a throwaway certificate authority and a server certificate
// it signed for 127.0.0.1 and localhost, as PEM files, made by NewTLSFiles.
type TLSFiles struct {
	// CAFile is the CA certificate: what a client verifies the server with.
	CAFile string
	// CertFile and KeyFile are the server's certificate and private key.
	CertFile, KeyFile string
	// Roots holds the CA certificate, for a tls.Config made in a test.
	Roots *x509.CertPool
}

// NewTLSFiles writes a fresh CA (ca.pem) and a server certificate and key
// (server.pem, server-key.pem) under dir; they are valid for one day and
// their keys never leave dir.
func NewTLSFiles(dir string) (*TLSFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("redistest: TLS files: %w", err)
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("redistest: CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("redistest: CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("redistest: CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("redistest: server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("redistest: server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("redistest: server key: %w", err)
	}
	f := &TLSFiles{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "server.pem"),
		KeyFile:  filepath.Join(dir, "server-key.pem"),
		Roots:    x509.NewCertPool(),
	}
	f.Roots.AddCert(caCert)
	for _, w := range []struct {
		path, kind string
		der        []byte
	}{{f.CAFile, "CERTIFICATE", caDER}, {f.CertFile, "CERTIFICATE", der}, {f.KeyFile, "PRIVATE KEY", keyDER}} {
		data := pem.EncodeToMemory(&pem.Block{Type: w.kind, Bytes: w.der})
		if err := os.WriteFile(w.path, data, 0o600); err != nil {
			return nil, fmt.Errorf("redistest: TLS files: %w", err)
		}
	}
	return f, nil
}

// ClientConfig is a TLS client configuration that trusts only the CA.
func (f *TLSFiles) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: f.Roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// StartTLSServer starts redis-server as StartServer does, and also on a
// TLS port (TLSAddr) with the certificate of files; clients are not asked
// for certificates. The plain port stays open, for the harness's own
// readiness checks and for test set-up. The caller must Stop the server.
func StartTLSServer(ctx context.Context, dir string, files *TLSFiles, extraArgs ...string) (*Server, error) {
	var errs []error
	for range startAttempts {
		tlsPort, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("redistest: start TLS server: %w", err)
		}
		args := append([]string{
			"--tls-port", strconv.Itoa(tlsPort),
			"--tls-cert-file", files.CertFile,
			"--tls-key-file", files.KeyFile,
			"--tls-ca-cert-file", files.CAFile,
			"--tls-auth-clients", "no",
		}, extraArgs...)
		s, err := StartServer(ctx, dir, args...)
		if err == nil {
			s.TLSPort = tlsPort
			s.TLSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("redistest: start TLS server: %w", errors.Join(errs...))
}

// StandaloneTLS starts a TLS-enabled redis-server (see StartTLSServer) with
// fresh TLS files for the test, in a t.TempDir(), and stops it in
// t.Cleanup.
func StandaloneTLS(t testing.TB) (*Server, *TLSFiles) {
	t.Helper()
	Require(t)
	dir := t.TempDir()
	files, err := NewTLSFiles(filepath.Join(dir, "tls"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := StartTLSServer(ctx, filepath.Join(dir, "redis"), files)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("redistest: stop %s: %v", s.Addr, err)
		}
	})
	return s, files
}
