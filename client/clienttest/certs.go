package clienttest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for a test, for the daemon's TLS
// (--tls-cert, --tls-client-ca): keys are made at run time, so that no key
// file is ever committed.
type CA struct {
	Cert *x509.Certificate
	PEM  []byte // the CA's certificate, what a bundle file holds
	key  crypto.Signer
}

// Leaf is a certificate a CA issued, with its key, both PEM-encoded.
type Leaf struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// LeafOptions say what to issue.
type LeafOptions struct {
	Name     string    // subject common name
	Hosts    []string  // IP addresses and DNS names it is valid for (a server's)
	Client   bool      // for client authentication (mutual TLS) instead of a server's
	NotAfter time.Time // zero: in a day; in the past for an expired one
}

// NewCA makes a CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		tb.Fatal(err)
	}
	crt, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{Cert: crt, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Issue makes a certificate and key signed by ca, with a serial number of
// its own.
func (ca *CA) Issue(tb testing.TB, o LeafOptions) *Leaf {
	tb.Helper()
	key := newKey(tb)
	notAfter := o.NotAfter
	if notAfter.IsZero() {
		notAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb), Subject: pkix.Name{CommonName: o.Name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if notAfter.Before(tmpl.NotBefore) {
		tmpl.NotBefore = notAfter.Add(-time.Hour)
	}
	if o.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	crt, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return &Leaf{Cert: crt, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})}
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Server(tb testing.TB) *Leaf {
	tb.Helper()
	return ca.Issue(tb, LeafOptions{Name: "loaderd", Hosts: []string{"127.0.0.1", "::1", "localhost"}})
}

// Write writes the certificate and key as NAME.crt and NAME.key in dir
// (the key readable by its owner only) and returns their paths.
func (l *Leaf) Write(tb testing.TB, dir, name string) (certFile, keyFile string) {
	tb.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, l.CertPEM, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyFile, l.KeyPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	return certFile, keyFile
}

// Write writes the CA's certificate as NAME.pem in dir and returns its path.
func (ca *CA) Write(tb testing.TB, dir, name string) string {
	tb.Helper()
	p := filepath.Join(dir, name+".pem")
	if err := os.WriteFile(p, ca.PEM, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// TLSFiles are the files of a loopback daemon serving mutual TLS and of its
// client, as WriteTLS writes them.
type TLSFiles struct {
	CA                    string // the CA's certificate: --tls-client-ca, and the client's trust
	ServerCert, ServerKey string // --tls-cert, --tls-key (127.0.0.1, ::1, localhost)
	ClientCert, ClientKey string // a client certificate of the same CA
}

// WriteTLS makes a CA, a server certificate and a client certificate, and
// writes them in dir.
func WriteTLS(tb testing.TB, dir string) TLSFiles {
	tb.Helper()
	ca := NewCA(tb, "test CA")
	f := TLSFiles{CA: ca.Write(tb, dir, "ca")}
	f.ServerCert, f.ServerKey = ca.Server(tb).Write(tb, dir, "server")
	f.ClientCert, f.ClientKey = ca.Issue(tb, LeafOptions{Name: "trainer", Client: true}).Write(tb, dir, "client")
	return f
}

// DaemonArgs are the loaderd serve flags that serve f on a loopback TCP
// port of the system's choosing (see Daemon.TCPAddr).
func (f TLSFiles) DaemonArgs() []string {
	return []string{"--log-level", "info", "--listen", "127.0.0.1:0", "--tls-cert", f.ServerCert, "--tls-key", f.ServerKey, "--tls-client-ca", f.CA}
}
