package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/client/clienttest"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// echoServer answers ListDatasets with one dataset named after what the
// call carried: its authorization metadata and its client certificate.
type echoServer struct{ pb.UnimplementedLoaderServer }

func (echoServer) ListDatasets(ctx context.Context, _ *pb.ListDatasetsRequest) (*pb.ListDatasetsResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	who := "no-cert"
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			who = ti.State.PeerCertificates[0].Subject.CommonName
		}
	}
	return &pb.ListDatasetsResponse{Datasets: []*pb.Dataset{{Name: strings.Join(md.Get("authorization"), ",") + "|" + who}}}, nil
}

// startEcho serves echoServer on loopback, over TLS when cfg is not nil.
func startEcho(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	var opts []grpc.ServerOption
	if cfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterLoaderServer(srv, echoServer{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestCredentialsDial: Dial with a Credentials' options speaks TLS (they
// replace Dial's plaintext default), presents the client certificate and
// sends the token; a token may go in plaintext to loopback only.
func TestCredentialsDial(t *testing.T) {
	dir := t.TempDir()
	ca, other := clienttest.NewCA(t, "test CA"), clienttest.NewCA(t, "other CA")
	caFile, otherFile := ca.Write(t, dir, "ca"), other.Write(t, dir, "other")
	leaf := ca.Server(t)
	srvCert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	tlsAddr := startEcho(t, &tls.Config{Certificates: []tls.Certificate{srvCert}, MinVersion: tls.VersionTLS13,
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool})
	plainAddr := startEcho(t, nil)
	certFile, keyFile := ca.Issue(t, clienttest.LeafOptions{Name: "rank0", Client: true}).Write(t, dir, "client")
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte("from-a-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const tok = "tok-0123456789abcdef"
	tests := []struct {
		name    string
		target  string
		creds   client.Credentials
		want    string // the dataset name echoed, or
		wantErr string // the call's error
	}{
		{"tls", tlsAddr, client.Credentials{CAFile: caFile}, "|no-cert", ""},
		{"tls token", tlsAddr, client.Credentials{CAFile: caFile, Token: tok}, "Bearer " + tok + "|no-cert", ""},
		{"mutual tls", tlsAddr, client.Credentials{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, "|rank0", ""},
		{"token file", tlsAddr, client.Credentials{CAFile: caFile, TokenFile: tokFile}, "Bearer from-a-file-0123456789|no-cert", ""},
		{"server name", tlsAddr, client.Credentials{CAFile: caFile, ServerName: "localhost"}, "|no-cert", ""},
		{"wrong server name", tlsAddr, client.Credentials{CAFile: caFile, ServerName: "elsewhere"}, "", "elsewhere"},
		{"wrong CA", tlsAddr, client.Credentials{CAFile: otherFile}, "", "certificate signed by unknown authority"},
		{"plaintext to TLS", tlsAddr, client.Credentials{}, "", "Unavailable"},
		{"token over loopback plaintext", plainAddr, client.Credentials{Token: tok}, "Bearer " + tok + "|no-cert", ""},
		{"localhost", "localhost:" + port(plainAddr), client.Credentials{Token: tok}, "Bearer " + tok + "|no-cert", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := tt.creds.DialOptions(tt.target)
			if err != nil {
				t.Fatal(err)
			}
			c, err := client.Dial(tt.target, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ds, err := c.Datasets(ctx)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(fmt.Sprint(err, status.Code(err)), tt.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case len(ds) != 1 || ds[0].GetName() != tt.want:
				t.Fatalf("the server saw %v, want %q", ds, tt.want)
			}
		})
	}
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// TestCredentialsRefused: what DialOptions refuses before any connection,
// and what it leaves to a Unix socket.
func TestCredentialsRefused(t *testing.T) {
	dir := t.TempDir()
	ca := clienttest.NewCA(t, "test CA")
	caFile := ca.Write(t, dir, "ca")
	certFile, keyFile := ca.Issue(t, clienttest.LeafOptions{Name: "c", Client: true}).Write(t, dir, "client")
	const tok = "tok-0123456789abcdef"
	tests := []struct {
		name    string
		target  string
		creds   client.Credentials
		wantErr string // "" accepts
		nOpts   int
	}{
		{"token in the clear", "node3:50051", client.Credentials{Token: tok}, "in the clear", 0},
		{"token in the clear, dns", "dns:///10.0.0.7:50051", client.Credentials{Token: tok}, "in the clear", 0},
		{"token, insecure allowed", "node3:50051", client.Credentials{Token: tok, Insecure: true}, "", 1},
		{"token over loopback", "127.0.0.2:50051", client.Credentials{Token: tok}, "", 1},
		{"token over ::1", "[::1]:50051", client.Credentials{Token: tok}, "", 1},
		{"token with TLS", "node3:50051", client.Credentials{TLS: true, Token: tok}, "", 2},
		{"unix socket: nothing", "unix:///run/loaderd.sock", client.Credentials{CAFile: caFile, Token: tok}, "", 0},
		{"two tokens", "127.0.0.1:1", client.Credentials{Token: tok, TokenFile: "/x"}, "a token and a token file", 0},
		{"missing token file", "127.0.0.1:1", client.Credentials{TokenFile: filepath.Join(dir, "none")}, "token file", 0},
		{"token with a space", "127.0.0.1:1", client.Credentials{Token: "a b"}, "spaces", 0},
		{"missing CA", "node3:50051", client.Credentials{CAFile: filepath.Join(dir, "none")}, "TLS CA", 0},
		{"CA not PEM", "node3:50051", client.Credentials{CAFile: keyFile}, "holds no PEM certificate", 0},
		{"cert without key", "node3:50051", client.Credentials{CAFile: caFile, CertFile: certFile}, "needs its key", 0},
		{"key of another cert", "node3:50051", client.Credentials{CAFile: caFile, CertFile: certFile, KeyFile: caFile}, "client certificate", 0},
		{"mutual TLS", "node3:50051", client.Credentials{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := tt.creds.DialOptions(tt.target)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "client: ") {
					t.Fatalf("got %v, want a client: error with %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), "a b") {
					t.Fatalf("the error shows the token: %v", err)
				}
				return
			}
			if err != nil || len(opts) != tt.nOpts {
				t.Fatalf("got %d options, %v; want %d", len(opts), err, tt.nOpts)
			}
		})
	}
}

// A trainer on another host than its daemon, which serves TLS and tokens:
// LOADERD_TLS_CA names the CA bundle, LOADERD_TOKEN_FILE a mounted secret.
func ExampleCredentials() {
	const addr = "loaderd.data.svc:50051"
	creds, err := client.CredentialsFromEnv()
	if err != nil {
		panic(err)
	}
	opts, err := creds.DialOptions(addr)
	if err != nil {
		panic(err)
	}
	c, err := client.Dial(addr, opts...)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	// c.Open(...) as over a Unix socket.
}

func TestCredentialsFromEnv(t *testing.T) {
	for k, v := range map[string]string{"LOADERD_TLS_CA": "/ca.pem", "LOADERD_TLS_CERT": "/c.crt", "LOADERD_TLS_KEY": "/c.key",
		"LOADERD_TLS_SERVER_NAME": "loaderd.svc", "LOADERD_TOKEN": "t0123456789abcdef", "LOADERD_TOKEN_FILE": "/run/secrets/token",
		"LOADERD_TLS": "1", "LOADERD_INSECURE": "true"} {
		t.Setenv(k, v)
	}
	got, err := client.CredentialsFromEnv()
	want := client.Credentials{TLS: true, CAFile: "/ca.pem", CertFile: "/c.crt", KeyFile: "/c.key", ServerName: "loaderd.svc",
		Token: "t0123456789abcdef", TokenFile: "/run/secrets/token", Insecure: true}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	t.Setenv("LOADERD_TLS", "yes please")
	if _, err := client.CredentialsFromEnv(); err == nil || !strings.Contains(err.Error(), "LOADERD_TLS=") {
		t.Fatalf("a bad LOADERD_TLS: %v", err)
	}
}

// TestCredentialsDaemon: a real daemon serving TLS with client
// certificates and tokens (loaderd serve's flags) streams to a client
// with CredentialsFromEnv's credentials, and refuses one without a token.
func TestCredentialsDaemon(t *testing.T) {
	dir := t.TempDir()
	tf := clienttest.WriteTLS(t, dir)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# test\ntok-0123456789abcdef datasets=train streams=2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := clienttest.Start(t, append(tf.DaemonArgs(), "--dataset", "train=synthetic:64", "--workers", "2", "--auth-tokens", tokens)...)
	addr := d.TCPAddr(t)
	for k, v := range map[string]string{"LOADERD_TLS_CA": tf.CA, "LOADERD_TLS_CERT": tf.ClientCert, "LOADERD_TLS_KEY": tf.ClientKey} {
		t.Setenv(k, v)
	}
	dial := func(token string) *client.Client {
		t.Setenv("LOADERD_TOKEN", token)
		creds, err := client.CredentialsFromEnv()
		if err != nil {
			t.Fatal(err)
		}
		opts, err := creds.DialOptions(addr)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.Dial(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := context.Background()
	s, err := dial("tok-0123456789abcdef").Open(ctx, client.StreamConfig{Dataset: "train", BatchSize: 16, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	for {
		b, err := s.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(b.Indices)
		b.Release()
	}
	if n != 64 {
		t.Fatalf("%d images over TLS, want 64", n)
	}
	if _, err := dial("").Datasets(ctx); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: %v, want UNAUTHENTICATED", err)
	}
}
