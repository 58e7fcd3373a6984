package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Credentials reach a daemon's TCP listener when it is secured
// (loaderd serve --tls-cert, --tls-client-ca, --auth-tokens): TLS 1.3,
// a client certificate for mutual TLS, a bearer token. A Unix socket needs
// none of them and is given none. The zero value is plaintext without a
// token, as Dial does by default.
type Credentials struct {
	TLS        bool   // TLS with the system's roots; implied by CAFile, CertFile and ServerName
	CAFile     string // PEM bundle the daemon's certificate must chain to; "": the system's roots
	CertFile   string // client certificate chain (PEM), with KeyFile: mutual TLS
	KeyFile    string
	ServerName string // name the daemon's certificate must carry; default the target's host
	Token      string // bearer token, one of the daemon's --auth-tokens
	TokenFile  string // or a file holding it, read at every call (a mounted secret rotates)
	// Insecure lets a token cross a plaintext connection to a host that is
	// not loopback: for a --insecure-tcp daemon behind something that
	// encrypts (a service mesh). A loopback host needs no such permission.
	Insecure bool
}

// CredentialsFromEnv reads Credentials from the environment:
// LOADERD_TLS_CA, LOADERD_TLS_CERT, LOADERD_TLS_KEY,
// LOADERD_TLS_SERVER_NAME, LOADERD_TLS (1: TLS with the system's roots),
// LOADERD_TOKEN, LOADERD_TOKEN_FILE and LOADERD_INSECURE (1: see
// Credentials.Insecure). Unset variables leave their fields empty.
func CredentialsFromEnv() (Credentials, error) {
	c := Credentials{
		CAFile: os.Getenv("LOADERD_TLS_CA"), CertFile: os.Getenv("LOADERD_TLS_CERT"), KeyFile: os.Getenv("LOADERD_TLS_KEY"),
		ServerName: os.Getenv("LOADERD_TLS_SERVER_NAME"), Token: os.Getenv("LOADERD_TOKEN"), TokenFile: os.Getenv("LOADERD_TOKEN_FILE"),
	}
	var errs []error
	for _, b := range []struct {
		name string
		v    *bool
	}{{"LOADERD_TLS", &c.TLS}, {"LOADERD_INSECURE", &c.Insecure}} {
		if s := os.Getenv(b.name); s != "" {
			v, err := strconv.ParseBool(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("client: %s=%q: want 1 or 0", b.name, s))
			}
			*b.v = v
		}
	}
	return c, errors.Join(errs...)
}

func (c Credentials) tls() bool {
	return c.TLS || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != ""
}

// DialOptions returns what Dial(target, ...) needs to reach target with c.
// They replace Dial's plaintext default (a later option wins in gRPC).
// Files are read now, so a missing one is an error here and not at the
// first call; the client certificate is read again at every handshake, so
// a reconnect presents a rotated one.
func (c Credentials) DialOptions(target string) ([]grpc.DialOption, error) {
	host, unix := targetHost(target)
	if unix {
		return nil, nil
	}
	var opts []grpc.DialOption
	if c.tls() {
		cfg, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
	if c.Token == "" && c.TokenFile == "" {
		return opts, nil
	}
	if c.Token != "" && c.TokenFile != "" {
		return nil, errors.New("client: a token and a token file at once (LOADERD_TOKEN and LOADERD_TOKEN_FILE): give one")
	}
	plainOK := c.Insecure || loopbackHost(host)
	if !c.tls() && !plainOK {
		return nil, fmt.Errorf("client: a token to %s would cross the network in the clear: set CAFile (LOADERD_TLS_CA) or TLS (LOADERD_TLS=1) for a daemon serving TLS, or Insecure (LOADERD_INSECURE=1) behind something that encrypts", target)
	}
	b := bearer{token: c.Token, file: c.TokenFile, secure: !plainOK}
	if _, err := b.read(); err != nil {
		return nil, err
	}
	return append(opts, grpc.WithPerRPCCredentials(b)), nil
}

func (c Credentials) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client: TLS CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client: TLS CA %s holds no PEM certificate", c.CAFile)
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("client: a client certificate needs its key and a key its certificate (LOADERD_TLS_CERT and LOADERD_TLS_KEY)")
	}
	if c.CertFile != "" {
		load := func() (*tls.Certificate, error) {
			crt, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("client: TLS client certificate: %w", err)
			}
			return &crt, nil
		}
		if _, err := load(); err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return load() }
	}
	return cfg, nil
}

// bearer sends "authorization: Bearer TOKEN" on every call.
type bearer struct {
	token, file string
	secure      bool // refuse a connection without TLS
}

func (b bearer) read() (string, error) {
	tok := b.token
	if b.file != "" {
		data, err := os.ReadFile(b.file)
		if err != nil {
			return "", fmt.Errorf("client: token file: %w", err)
		}
		tok = strings.TrimSpace(string(data))
	}
	if tok == "" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		// Never the token in the message: it may be a near miss of a real one.
		return "", errors.New("client: the token is empty or holds spaces or control characters")
	}
	return tok, nil
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := b.read()
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

// targetHost returns the host of a gRPC target ("host:port",
// "dns:///host:port", "passthrough:///host:port"), or unix for a Unix
// socket's.
func targetHost(target string) (host string, unix bool) {
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return "", true
	}
	rest := target
	if _, after, ok := strings.Cut(rest, "://"); ok { // scheme://authority/endpoint
		_, rest, _ = strings.Cut(after, "/")
	} else if after, ok := strings.CutPrefix(rest, "dns:"); ok {
		rest = after
	}
	if h, _, err := net.SplitHostPort(rest); err == nil {
		return h, false
	}
	return rest, false
}

// loopbackHost: localhost, or an address in 127.0.0.0/8 or ::1.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
