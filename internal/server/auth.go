package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// auth checks the client certificates and bearer tokens of the TCP
// listener's calls.
type auth struct {
	clientCAs *watched[*x509.CertPool] // nil: no client certificates asked
	tokens    *watched[*tokenTable]    // nil: no tokens asked
	log       *slog.Logger
	refusals  *prometheus.CounterVec

	mu   sync.Mutex
	open map[[sha256.Size]byte]int // streams each token holds
}

func newAuth(clientCAs *watched[*x509.CertPool], tokens *watched[*tokenTable], log *slog.Logger) *auth {
	return &auth{clientCAs: clientCAs, tokens: tokens, log: log, open: map[[sha256.Size]byte]int{},
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loaderd_auth_refusals_total",
			Help: "Calls on the TCP listener refused, by reason: client_cert (none, or not valid for --tls-client-ca), missing (no bearer token), unknown (token), dataset (not the token's), streams (the token's limit)."},
			[]string{"reason"})}
}

// exempt: health checks answer without a token or client certificate, so
// that probes which cannot send one still work; they reveal nothing.
func exempt(method string) bool { return strings.HasPrefix(method, "/grpc.health.v1.Health/") }

// authenticate checks the call's client certificate and returns the grant
// of its token (nil without tokens: no limits), or the refusal.
func (a *auth) authenticate(ctx context.Context) (*grant, error) {
	if a.clientCAs != nil {
		if err := a.checkClientCert(ctx); err != nil {
			return nil, err
		}
	}
	if a.tokens == nil {
		return nil, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return nil, a.refuse(ctx, "missing", nil, codes.Unauthenticated,
			"loaderd: this daemon's TCP listener needs a bearer token: send the metadata \"authorization: Bearer TOKEN\" (clients: LOADERD_TOKEN or LOADERD_TOKEN_FILE)")
	}
	scheme, tok, _ := strings.Cut(vals[0], " ")
	if len(vals) > 1 || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return nil, a.refuse(ctx, "missing", nil, codes.Unauthenticated,
			"loaderd: the authorization metadata must be one \"Bearer TOKEN\"")
	}
	g := a.tokens.get().lookup(strings.TrimSpace(tok))
	if g == nil {
		return nil, a.refuse(ctx, "unknown", nil, codes.Unauthenticated,
			"loaderd: unknown bearer token: it is not in the daemon's --auth-tokens file (mistyped, or revoked)")
	}
	return g, nil
}

// checkClientCert verifies the certificate the client presented in the
// handshake against the client CAs in effect now.
func (a *auth) checkClientCert(ctx context.Context) error {
	var certs []*x509.Certificate
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			certs = ti.State.PeerCertificates
		}
	}
	if len(certs) == 0 {
		return a.refuse(ctx, "client_cert", nil, codes.Unauthenticated,
			"loaderd: this daemon's TCP listener needs a client certificate (mutual TLS) signed by a CA of its --tls-client-ca (clients: LOADERD_TLS_CERT and LOADERD_TLS_KEY)")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: a.clientCAs.get(), Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return a.refuse(ctx, "client_cert", nil, codes.Unauthenticated,
			fmt.Sprintf("loaderd: client certificate %q refused for --tls-client-ca: %v", certs[0].Subject.CommonName, err))
	}
	return nil
}

// permit refuses a dataset the token may not open.
func (a *auth) permit(ctx context.Context, g *grant, dataset string) error {
	if g == nil || g.may(dataset) {
		return nil
	}
	return a.refuse(ctx, "dataset", g, codes.PermissionDenied,
		fmt.Sprintf("loaderd: this token may not open dataset %q (it may open: %s)", dataset, g.list()))
}

// acquire counts one more stream of the token, within its limit.
func (a *auth) acquire(ctx context.Context, g *grant) error {
	if g == nil {
		return nil
	}
	a.mu.Lock()
	if g.streams > 0 && a.open[g.sum] >= g.streams {
		a.mu.Unlock()
		return a.refuse(ctx, "streams", g, codes.ResourceExhausted,
			fmt.Sprintf("loaderd: this token already holds its %d streams (streams= of its line in --auth-tokens); close one first", g.streams))
	}
	a.open[g.sum]++
	a.mu.Unlock()
	return nil
}

func (a *auth) release(g *grant) {
	a.mu.Lock()
	if a.open[g.sum]--; a.open[g.sum] <= 0 {
		delete(a.open, g.sum)
	}
	a.mu.Unlock()
}

// refuse counts and logs a refusal and returns its status. The log names
// the token by its hash prefix at most, never the token.
func (a *auth) refuse(ctx context.Context, reason string, g *grant, code codes.Code, msg string) error {
	a.refusals.WithLabelValues(reason).Inc()
	attrs := []any{"reason", reason}
	if p, ok := peer.FromContext(ctx); ok {
		attrs = append(attrs, "peer", p.Addr.String())
	}
	if g != nil {
		attrs = append(attrs, "token", g.id(), "token_line", g.line)
	}
	a.log.Warn("refused a call", attrs...)
	return status.Error(code, msg)
}

// unary authenticates, checks a request that names a dataset, and trims
// ListDatasets to the token's datasets.
func (a *auth) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if exempt(info.FullMethod) {
		return handler(ctx, req)
	}
	g, err := a.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	// Any request with a dataset field, SampleNames' and those to come.
	if r, ok := req.(interface{ GetDataset() string }); ok {
		if err := a.permit(ctx, g, r.GetDataset()); err != nil {
			return nil, err
		}
	}
	resp, err := handler(ctx, req)
	if r, ok := resp.(*pb.ListDatasetsResponse); ok && g != nil && !g.all {
		r.Datasets = slices.DeleteFunc(r.Datasets, func(d *pb.Dataset) bool { return !g.may(d.GetName()) })
	}
	return resp, err
}

// stream authenticates, then checks the Open of the first message (its
// dataset, the token's stream limit) as the handler receives it.
func (a *auth) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if exempt(info.FullMethod) {
		return handler(srv, ss)
	}
	g, err := a.authenticate(ss.Context())
	if err != nil {
		return err
	}
	if g == nil {
		return handler(srv, ss) // no tokens: nothing to check in the Open
	}
	as := &authStream{ServerStream: ss, a: a, g: g}
	defer func() {
		if as.held.Load() {
			a.release(g)
		}
	}()
	return handler(srv, as)
}

type authStream struct {
	grpc.ServerStream
	a       *auth
	g       *grant
	checked atomic.Bool
	held    atomic.Bool // a stream of the token's limit is counted
}

func (s *authStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.checked.Swap(true) {
		return nil
	}
	r, ok := m.(interface{ GetOpen() *pb.Open })
	if !ok || r.GetOpen() == nil {
		return nil // not an Open: the handler refuses it
	}
	ctx := s.Context()
	if err := s.a.permit(ctx, s.g, r.GetOpen().GetDataset()); err != nil {
		return err
	}
	if err := s.a.acquire(ctx, s.g); err != nil {
		return err
	}
	s.held.Store(true)
	return nil
}
