package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// SecurityConfig names the files that secure the TCP listener. The Unix
// socket and its shared-memory hand-over never use them: whoever reaches
// the socket is on the host, and its mode decides who may.
type SecurityConfig struct {
	CertFile, KeyFile string        // server certificate chain and key (PEM); both or neither
	ClientCAFile      string        // CA bundle client certificates must chain to (mutual TLS)
	TokensFile        string        // bearer tokens, one per line (see loadTokens)
	ReloadEvery       time.Duration // how often the files are checked for changes; default 1 s
	Logger            *slog.Logger  // nil: slog.Default()
}

// Security is the TCP listener's TLS and tokens, loaded from the files of
// a SecurityConfig and loaded again when they change on disk. Build one
// with NewSecurity and give it to New in Options.Security.
type Security struct {
	log  *slog.Logger
	cert *watched[*tls.Certificate]
	auth *auth // nil without client CAs or tokens
}

// NewSecurity loads every file c names; an unreadable or malformed one is
// an error now, where later a bad reload only keeps the previous contents.
func NewSecurity(c SecurityConfig) (*Security, error) {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ReloadEvery <= 0 {
		c.ReloadEvery = time.Second
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("server: a TLS certificate needs its key and a key its certificate")
	}
	if c.ClientCAFile != "" && c.CertFile == "" {
		return nil, errors.New("server: client certificates (mutual TLS) need the server's own certificate and key")
	}
	s := &Security{log: c.Logger}
	var (
		err       error
		clientCAs *watched[*x509.CertPool]
		tokens    *watched[*tokenTable]
	)
	if c.CertFile != "" {
		s.cert, err = newWatched("TLS certificate", []string{c.CertFile, c.KeyFile}, c.ReloadEvery, c.Logger,
			func() (*tls.Certificate, error) {
				crt, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
				return &crt, err
			})
		if err != nil {
			return nil, fmt.Errorf("server: --tls-cert %s, --tls-key %s: %w", c.CertFile, c.KeyFile, err)
		}
	}
	if c.ClientCAFile != "" {
		clientCAs, err = newWatched("client CA bundle", []string{c.ClientCAFile}, c.ReloadEvery, c.Logger,
			func() (*x509.CertPool, error) { return loadCAs(c.ClientCAFile) })
		if err != nil {
			return nil, fmt.Errorf("server: --tls-client-ca %s: %w", c.ClientCAFile, err)
		}
	}
	if c.TokensFile != "" {
		tokens, err = newWatched("auth tokens", []string{c.TokensFile}, c.ReloadEvery, c.Logger,
			func() (*tokenTable, error) { return loadTokens(c.TokensFile) })
		if err != nil {
			return nil, fmt.Errorf("server: --auth-tokens %s: %w", c.TokensFile, err)
		}
	}
	if clientCAs != nil || tokens != nil {
		s.auth = newAuth(clientCAs, tokens, c.Logger)
	}
	return s, nil
}

// loadCAs reads a PEM bundle of one or more CA certificates.
func loadCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate in the file")
	}
	return pool, nil
}

// serverOptions are what the TCP gRPC server adds to the Unix socket's:
// TLS when a certificate is configured, the client certificate and token
// checks when those are.
func (s *Security) serverOptions() []grpc.ServerOption {
	var opts []grpc.ServerOption
	if s.cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tlsConfig())))
	}
	if s.auth != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(s.auth.unary), grpc.ChainStreamInterceptor(s.auth.stream))
	}
	return opts
}

// register adds the refusal counter to reg; a second server on the same
// registry and Security shares it.
func (s *Security) register(reg *prometheus.Registry) {
	if s.auth == nil {
		return
	}
	if err := reg.Register(s.auth.refusals); err != nil {
		if _, dup := err.(prometheus.AlreadyRegisteredError); !dup {
			s.log.Warn("auth metrics not registered", "err", err)
		}
	}
}

// tlsConfig looks the certificate up per handshake, so a rotation reaches
// new connections while open ones keep theirs.
func (s *Security) tlsConfig() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.get(), nil }}
	if s.auth != nil && s.auth.clientCAs != nil {
		// Asked for here, verified per call (auth.checkClientCert): in TLS
		// 1.3 the client's handshake ends before the server's verdict, so a
		// refusal in the handshake reaches it as a broken pipe; a status
		// can say what is wrong with its certificate.
		cfg.ClientAuth = tls.RequestClientCert
	}
	return cfg
}

// watched is a value loaded from files, loaded again when one of them
// changes: at most once per every, get stats the files, and a change of
// size, modification time or identity (a symlink swapped, a file replaced
// by a rename) reloads. A reload that fails, such as of a half-written
// file, keeps the previous value and warns once per change of the files.
type watched[T any] struct {
	what  string
	paths []string
	every time.Duration
	load  func() (T, error)
	log   *slog.Logger

	mu     sync.Mutex
	val    T
	stat   []os.FileInfo // the files val was loaded from
	failed []os.FileInfo // the files a reload last failed on
	next   time.Time     // when to look again
}

func newWatched[T any](what string, paths []string, every time.Duration, log *slog.Logger, load func() (T, error)) (*watched[T], error) {
	st, err := statAll(paths)
	if err != nil {
		return nil, err
	}
	v, err := load()
	if err != nil {
		return nil, err
	}
	return &watched[T]{what: what, paths: paths, every: every, load: load, log: log,
		val: v, stat: st, next: time.Now().Add(every)}, nil
}

// get returns the current value, reloading it first if its files changed.
func (w *watched[T]) get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Before(w.next) {
		return w.val
	}
	w.next = now.Add(w.every)
	// Stat before reading: a change while reading shows at the next look.
	st, err := statAll(w.paths)
	if err != nil || sameFiles(st, w.stat) || sameFiles(st, w.failed) {
		return w.val // a missing file is a swap in progress, or a mistake the old value outlives
	}
	v, err := w.load()
	if err != nil {
		w.failed = st
		w.log.Warn("reload failed; keeping the previous "+w.what, "files", w.paths, "err", err)
		return w.val
	}
	w.val, w.stat, w.failed = v, st, nil
	w.log.Info("reloaded "+w.what, "files", w.paths)
	return w.val
}

func statAll(paths []string) ([]os.FileInfo, error) {
	out := make([]os.FileInfo, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p) // follows symlinks: a swapped link is a different file
		if err != nil {
			return nil, err
		}
		out[i] = fi
	}
	return out, nil
}

func sameFiles(a, b []os.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !os.SameFile(a[i], b[i]) || a[i].Size() != b[i].Size() || !a[i].ModTime().Equal(b[i].ModTime()) {
			return false
		}
	}
	return true
}
