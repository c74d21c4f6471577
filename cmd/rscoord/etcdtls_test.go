package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeCA writes a self-signed CA certificate (PEM) to path.
func writeCA(t *testing.T, path string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBinaryEtcdTLSFlagsNeedTLSEndpoints: --etcd-ca (which its help says
// turns TLS on) with an http:// endpoint is refused before anything is
// sent. The etcd client drops TLS for http:// endpoints whatever its TLS
// configuration says, so the replica used to talk to "etcd" in clear
// text, its etcd password included, while its operator believed the CA
// was checked. The fake etcd here records the first bytes it gets: a TLS
// handshake starts with 0x16, gRPC in clear text with "PRI * HTTP/2.0".
func TestBinaryEtcdTLSFlagsNeedTLSEndpoints(t *testing.T) {
	t.Parallel()
	bin, err := builder.Build(context.Background(), "github.com/rscoord/rscoord/cmd/rscoord")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	writeCA(t, ca)
	fake, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	var (
		mu    sync.Mutex
		first [][]byte
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := fake.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 16)
				n, _ := io.ReadAtLeast(c, buf, 1)
				mu.Lock()
				first = append(first, buf[:n])
				mu.Unlock()
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--store", "etcd", "--etcd-endpoints", "http://"+fake.Addr().String(), "--etcd-ca", ca,
		"--etcd-username", "root", "--advertise-url", "http://127.0.0.1:1")
	cmd.Env = append(os.Environ(), envEtcdPassword+"=etcd-secret", envAdminPassword+"=etcd-tls-admin-pw")
	out, err := cmd.CombinedOutput()
	fake.Close()
	wg.Wait()
	for _, b := range first {
		if len(b) > 0 && b[0] != 0x16 {
			t.Errorf("the replica sent %q to an etcd it was told to check with --etcd-ca: not a TLS handshake", b)
		}
		if bytes.Contains(b, []byte("PRI * HTTP")) {
			t.Errorf("clear-text gRPC to etcd despite --etcd-ca")
		}
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitError {
		t.Fatalf("exit %v, want code %d:\n%s", err, exitError, out)
	}
	if !strings.Contains(string(out), "--etcd-ca") || !strings.Contains(string(out), "https://") {
		t.Errorf("the refusal does not name --etcd-ca and https://:\n%s", out)
	}
}
