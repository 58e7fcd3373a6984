package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
	"github.com/loaderd/loaderd/loader/format/synthetic"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// startSecure serves synthetic datasets "a" and "b" with sc's security on
// a loopback TCP port, and on a Unix socket; it returns the server, the
// TCP address, the socket's address and the server's log. Files are
// looked at for changes on every use.
func startSecure(t *testing.T, sc SecurityConfig) (srv *Server, tcp, unix string, log *clienttest.LockedBuffer) {
	t.Helper()
	log = &clienttest.LockedBuffer{}
	sc.Logger = slog.New(slog.NewTextHandler(log, nil))
	sc.ReloadEvery = time.Nanosecond
	sec, err := NewSecurity(sc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err = New(Options{Workers: 2, Logger: sc.Logger, AckTimeout: 5 * time.Second, Security: sec},
		&Dataset{Name: "a", Spec: "synthetic:64", Source: synthetic.New(64, 0)},
		&Dataset{Name: "b", Spec: "synthetic:64", Source: synthetic.New(64, 1)})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(shortTemp(t), "s.sock")
	ulis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	go srv.Serve(ulis)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv, lis.Addr().String(), "unix://" + sock, log
}

// shortTemp is a temporary directory with a path short enough for a
// socket (t.TempDir's can pass the 108-byte limit).
func shortTemp(t *testing.T) string {
	d, err := os.MkdirTemp("", "lt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// dialWith dials addr with creds' options, then extra ones.
func dialWith(t *testing.T, addr string, creds client.Credentials, extra ...grpc.DialOption) *client.Client {
	t.Helper()
	opts, err := creds.DialOptions(addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(addr, append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// peerSerial lists the datasets through c and returns the serial number of
// the certificate the daemon presented on c's connection.
func peerSerial(t *testing.T, c *client.Client) (*big.Int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var p peer.Peer
	if _, err := pb.NewLoaderClient(c.Conn()).ListDatasets(ctx, &pb.ListDatasetsRequest{}, grpc.Peer(&p)); err != nil {
		return nil, err
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		t.Fatalf("no TLS peer certificate: %#v", p.AuthInfo)
	}
	if ti.State.Version != tls.VersionTLS13 {
		t.Fatalf("TLS version %x, want 1.3", ti.State.Version)
	}
	return ti.State.PeerCertificates[0].SerialNumber, nil
}

// TestTLSRefusals: with --tls-client-ca, only a client that trusts the
// daemon's CA and presents a valid certificate of the client CA gets in.
func TestTLSRefusals(t *testing.T) {
	dir := t.TempDir()
	ca, other := clienttest.NewCA(t, "loaderd CA"), clienttest.NewCA(t, "other CA")
	caFile, otherFile := ca.Write(t, dir, "ca"), other.Write(t, dir, "other")
	srvCert, srvKey := ca.Server(t).Write(t, dir, "server")
	srv, addr, _, _ := startSecure(t, SecurityConfig{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: caFile})
	cert, key := ca.Issue(t, clienttest.LeafOptions{Name: "rank0", Client: true}).Write(t, dir, "good")
	oldCert, oldKey := ca.Issue(t, clienttest.LeafOptions{Name: "rank0", Client: true, NotAfter: time.Now().Add(-time.Hour)}).Write(t, dir, "expired")
	strangerCert, strangerKey := other.Issue(t, clienttest.LeafOptions{Name: "stranger", Client: true}).Write(t, dir, "stranger")
	tls12 := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MaxVersion: tls.VersionTLS12, ServerName: "localhost"}))
	tests := []struct {
		name  string
		creds client.Credentials
		extra []grpc.DialOption
		code  codes.Code
		msg   string // a part of the error
	}{
		{"valid client certificate", client.Credentials{CAFile: caFile, CertFile: cert, KeyFile: key}, nil, codes.OK, ""},
		{"client trusts another CA", client.Credentials{CAFile: otherFile, CertFile: cert, KeyFile: key}, nil, codes.Unavailable, "certificate signed by unknown authority"},
		{"no client certificate", client.Credentials{CAFile: caFile}, nil, codes.Unauthenticated, "loaderd: this daemon's TCP listener needs a client certificate (mutual TLS)"},
		{"expired client certificate", client.Credentials{CAFile: caFile, CertFile: oldCert, KeyFile: oldKey}, nil, codes.Unauthenticated, `loaderd: client certificate "rank0" refused for --tls-client-ca: x509: certificate has expired`},
		{"client certificate of another CA", client.Credentials{CAFile: caFile, CertFile: strangerCert, KeyFile: strangerKey}, nil, codes.Unauthenticated, `loaderd: client certificate "stranger" refused for --tls-client-ca: x509: certificate signed by unknown authority`},
		{"server certificate as a client's", client.Credentials{CAFile: caFile, CertFile: srvCert, KeyFile: srvKey}, nil, codes.Unauthenticated, "incompatible key usage"},
		{"plaintext", client.Credentials{}, nil, codes.Unavailable, ""},
		{"TLS 1.2", client.Credentials{}, []grpc.DialOption{tls12}, codes.Unavailable, "protocol version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialWith(t, addr, tt.creds, tt.extra...)
			_, err := peerSerial(t, c)
			if status.Code(err) != tt.code || !strings.Contains(fmt.Sprint(err), tt.msg) {
				t.Fatalf("got %v, want %v with %q", err, tt.code, tt.msg)
			}
			if tt.code == codes.Unauthenticated && refusals(t, srv, "client_cert") == 0 {
				t.Fatal("the refusal is not counted")
			}
		})
	}
}

// k8sSecret lays cert and key out as a mounted Kubernetes secret does:
// tls.crt -> ..data/tls.crt, ..data -> a directory per version; each call
// swaps ..data to a new version atomically (rename of a symlink).
func k8sSecret(t *testing.T, dir string, version int, leaf *clienttest.Leaf) (certFile, keyFile string) {
	t.Helper()
	ver := filepath.Join(dir, "..v"+string(rune('0'+version)))
	if err := os.Mkdir(ver, 0o755); err != nil {
		t.Fatal(err)
	}
	leaf.Write(t, ver, "tls")
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ver), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for _, f := range []string{certFile, keyFile} {
		if _, err := os.Lstat(f); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", filepath.Base(f)), f); err != nil {
				t.Fatal(err)
			}
		}
	}
	return certFile, keyFile
}

// TestCertRotation: replacing the certificate and key files (a symlink
// swap) reaches new connections, an open stream keeps running on the
// old one, and a half-written file keeps the old certificate.
func TestCertRotation(t *testing.T) {
	dir := t.TempDir()
	ca := clienttest.NewCA(t, "loaderd CA")
	caFile := ca.Write(t, t.TempDir(), "ca")
	first, second := ca.Server(t), ca.Server(t)
	certFile, keyFile := k8sSecret(t, dir, 1, first)
	_, addr, _, log := startSecure(t, SecurityConfig{CertFile: certFile, KeyFile: keyFile})
	creds := client.Credentials{CAFile: caFile}

	old := dialWith(t, addr, creds)
	if got, err := peerSerial(t, old); err != nil || got.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("serial %v, %v; want the first certificate's", got, err)
	}
	ctx := context.Background()
	s, err := old.Open(ctx, client.StreamConfig{Dataset: "a", BatchSize: 8, Prefetch: 2}) // endless
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next := func(n int) {
		t.Helper()
		for range n {
			b, err := s.Next(ctx)
			if err != nil {
				t.Fatalf("the open stream: %v", err)
			}
			b.Release()
		}
	}
	next(3)

	// A writer that rewrites the key in place is caught half-way.
	if err := os.WriteFile(filepath.Join(dir, "..v1", "tls.key"), second.KeyPEM[:len(second.KeyPEM)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := peerSerial(t, dialWith(t, addr, creds)); err != nil || got.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("after a half-written key: serial %v, %v; want the first certificate's, kept", got, err)
	}
	if !strings.Contains(log.String(), "reload failed") {
		t.Fatalf("no warning for the failed reload; log:\n%s", log)
	}

	k8sSecret(t, dir, 2, second)
	next(20) // longer than the window: the daemon keeps sending
	if got, err := peerSerial(t, dialWith(t, addr, creds)); err != nil || got.Cmp(second.Cert.SerialNumber) != 0 {
		t.Fatalf("a new connection after the rotation: serial %v, %v; want the second certificate's", got, err)
	}
	if got, err := peerSerial(t, old); err != nil || got.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatalf("the old connection: serial %v, %v; want it kept, with the first certificate", got, err)
	}
	next(3)
	if strings.Contains(log.String(), "PRIVATE KEY") {
		t.Fatalf("the log shows key material:\n%s", log)
	}
}

// TestClientCAReload: a client CA added to the bundle file admits its
// clients' certificates from the next handshake.
func TestClientCAReload(t *testing.T) {
	dir := t.TempDir()
	ca, other := clienttest.NewCA(t, "loaderd CA"), clienttest.NewCA(t, "new clients' CA")
	caFile := ca.Write(t, dir, "ca")
	bundle := other.Write(t, dir, "bundle") // replaced below by the server's bundle
	if err := os.WriteFile(bundle, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey := ca.Server(t).Write(t, dir, "server")
	_, addr, _, _ := startSecure(t, SecurityConfig{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: bundle})
	cert, key := other.Issue(t, clienttest.LeafOptions{Name: "new", Client: true}).Write(t, dir, "new")
	creds := client.Credentials{CAFile: caFile, CertFile: cert, KeyFile: key}
	if _, err := peerSerial(t, dialWith(t, addr, creds)); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "signed by unknown authority") {
		t.Fatalf("a client of a CA not in the bundle: %v", err)
	}
	tmp := bundle + ".tmp"
	if err := os.WriteFile(tmp, append(append([]byte{}, ca.PEM...), other.PEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, bundle); err != nil {
		t.Fatal(err)
	}
	if _, err := peerSerial(t, dialWith(t, addr, creds)); err != nil {
		t.Fatalf("after the CA joined the bundle: %v", err)
	}
}

// TestRunSecure: Run serves the TCP listener with the flags' TLS and
// tokens, and the Unix socket without either.
func TestRunSecure(t *testing.T) {
	dir := t.TempDir()
	ca := clienttest.NewCA(t, "loaderd CA")
	caFile := ca.Write(t, dir, "ca")
	cert, key := ca.Server(t).Write(t, dir, "server")
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("run-token-0123456789 datasets=*\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(shortTemp(t), "l.sock")
	cfg := Config{Listen: "127.0.0.1:0", Unix: sock, Datasets: []string{"s=synthetic:64"}, Workers: 1,
		ShutdownTimeout: time.Second, TLSCert: cert, TLSKey: key, AuthTokens: tokens}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.TLSKey = filepath.Join(dir, "missing.key")
	if err := Run(context.Background(), bad, slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Fatalf("Run with a missing key: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan []string, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler), func(a []string) { ready <- a }) }()
	addr := (<-ready)[0]
	tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer tcancel()
	for _, tt := range []struct {
		name, addr string
		creds      client.Credentials
		want       codes.Code
	}{
		{"TLS and token", addr, client.Credentials{CAFile: caFile, Token: "run-token-0123456789"}, codes.OK},
		{"TLS, no token", addr, client.Credentials{CAFile: caFile}, codes.Unauthenticated},
		{"plaintext", addr, client.Credentials{Token: "run-token-0123456789"}, codes.Unavailable},
		{"Unix socket", "unix://" + sock, client.Credentials{}, codes.OK},
	} {
		if _, err := dialWith(t, tt.addr, tt.creds).Datasets(tctx); status.Code(err) != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	cancel()
	if err := <-done; err != nil && err != io.EOF {
		t.Fatalf("Run: %v", err)
	}
}
