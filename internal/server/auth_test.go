package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/client"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

const (
	tokAll = "all-datasets-token-0001"
	tokA   = "only-dataset-a-token-02"
)

// writeTokens replaces path with body as an operator's tooling would: a
// new file renamed over the old.
func writeTokens(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func refusals(t *testing.T, srv *Server, reason string) float64 {
	t.Helper()
	mfs, err := srv.opts.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "loaderd_auth_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// names lists the datasets c may see.
func names(ctx context.Context, c *client.Client) ([]string, error) {
	ds, err := c.Datasets(ctx)
	var out []string
	for _, d := range ds {
		out = append(out, d.GetName())
	}
	return out, err
}

// TestTokenRefusals: each refusal of a token has its code, a message that
// says what to do, and its count; the token never reaches the log; the
// Unix socket needs no token.
func TestTokenRefusals(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, tokens, "# operators\n"+tokAll+" datasets=*\n\n"+tokA+" datasets=a streams=1\n")
	srv, addr, unix, log := startSecure(t, SecurityConfig{TokensFile: tokens}) // tokens over loopback plaintext
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok := func(s string) *client.Client { return dialWith(t, addr, client.Credentials{Token: s}) }
	open := func(c *client.Client, dataset string) error {
		s, err := c.Open(ctx, client.StreamConfig{Dataset: dataset, BatchSize: 8, Reconnects: -1})
		if err == nil {
			s.Close()
		}
		return err
	}
	sampleNames := func(c *client.Client, dataset string) error {
		_, err := pb.NewLoaderClient(c.Conn()).SampleNames(ctx, &pb.SampleNamesRequest{Dataset: dataset, Count: 1})
		return err
	}
	getSamples := func(c *client.Client, dataset string) error {
		_, err := c.GetSamples(ctx, client.GetRequest{Dataset: dataset, Indices: []int64{0}})
		return err
	}
	tests := []struct {
		name   string
		call   func() error
		code   codes.Code
		msg    string
		reason string // the counter's label
	}{
		{"no token", func() error { _, err := names(ctx, tok("")); return err }, codes.Unauthenticated, "needs a bearer token", "missing"},
		{"wrong token", func() error { _, err := names(ctx, tok("not-a-known-token-0000")); return err }, codes.Unauthenticated, "unknown bearer token", "unknown"},
		{"wrong token, stream", func() error { return open(tok("not-a-known-token-0000"), "a") }, codes.Unauthenticated, "unknown bearer token", "unknown"},
		{"dataset not the token's", func() error { return open(tok(tokA), "b") }, codes.PermissionDenied, `may not open dataset "b"`, "dataset"},
		{"unregistered dataset", func() error { return open(tok(tokA), "zzz") }, codes.PermissionDenied, `may not open dataset "zzz" (it may open: a)`, "dataset"},
		{"names of a dataset not the token's", func() error { return sampleNames(tok(tokA), "b") }, codes.PermissionDenied, `may not open dataset "b"`, "dataset"},
		{"names of its dataset", func() error { return sampleNames(tok(tokA), "a") }, codes.OK, "", ""},
		{"samples of a dataset not the token's", func() error { return getSamples(tok(tokA), "b") }, codes.PermissionDenied, `may not open dataset "b"`, "dataset"},
		{"samples of its dataset", func() error { return getSamples(tok(tokA), "a") }, codes.OK, "", ""},
		{"any dataset", func() error { return open(tok(tokAll), "b") }, codes.OK, "", ""},
		{"Unix socket, no token", func() error { return open(dialWith(t, unix, client.Credentials{}), "b") }, codes.OK, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := refusals(t, srv, tt.reason)
			err := tt.call()
			if status.Code(err) != tt.code || !strings.Contains(fmt.Sprint(err), tt.msg) {
				t.Fatalf("got %v, want %v with %q", err, tt.code, tt.msg)
			}
			if tt.reason != "" && refusals(t, srv, tt.reason) != before+1 {
				t.Fatalf("loaderd_auth_refusals_total{reason=%q} did not count it", tt.reason)
			}
		})
	}
	for _, tt := range []struct {
		token string
		want  string
	}{{tokAll, "a b"}, {tokA, "a"}} {
		got, err := names(ctx, tok(tt.token))
		if err != nil || strings.Join(got, " ") != tt.want {
			t.Errorf("ListDatasets with token %s: %v, %v; want %s", tt.token[:4], got, err, tt.want)
		}
	}
	// Health answers without a token (probes cannot send one).
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without a token: %v, %v", r, err)
	}
	for _, secret := range []string{tokAll, tokA, "not-a-known-token"} {
		if strings.Contains(log.String(), secret) {
			t.Fatalf("the log shows a token:\n%s", log)
		}
	}
	if !strings.Contains(log.String(), "token=sha256:") {
		t.Fatalf("a refused known token is not named by its hash in the log:\n%s", log)
	}
}

// TestTokenStreamLimit: a token's streams= bounds its open streams; one
// that ends frees its place.
func TestTokenStreamLimit(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, tokens, tokA+" datasets=a streams=2\n"+tokAll+" datasets=*\n")
	srv, addr, _, _ := startSecure(t, SecurityConfig{TokensFile: tokens})
	ctx := context.Background()
	c := dialWith(t, addr, client.Credentials{Token: tokA})
	open := func() (*client.Stream, error) {
		return c.Open(ctx, client.StreamConfig{Dataset: "a", BatchSize: 8, Reconnects: -1})
	}
	var held []*client.Stream
	for range 2 {
		s, err := open()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	_, err := open()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "already holds its 2 streams") {
		t.Fatalf("a third stream: %v, want RESOURCE_EXHAUSTED naming the limit", err)
	}
	if refusals(t, srv, "streams") != 1 {
		t.Fatal("the refusal is not counted")
	}
	// Another token's streams are its own.
	other, err := dialWith(t, addr, client.Credentials{Token: tokAll}).Open(ctx, client.StreamConfig{Dataset: "a", BatchSize: 8})
	if err != nil {
		t.Fatalf("another token: %v", err)
	}
	other.Close()
	held[0].Close()
	waitFor(t, func() bool {
		s, err := open()
		if err == nil {
			s.Close()
		}
		return err == nil
	})
	held[1].Close()
}

// TestTokenReload: a token added to the file is accepted, a removed one
// refused, and a malformed file keeps the tokens in effect, with a warning
// that names the line and not the token.
func TestTokenReload(t *testing.T) {
	const tokNew, tokBad = "a-token-added-later-03", "a-token-on-a-bad-line-04"
	tokens := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, tokens, tokA+" datasets=a\n")
	_, addr, _, log := startSecure(t, SecurityConfig{TokensFile: tokens})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list := func(tok string) ([]string, error) {
		return names(ctx, dialWith(t, addr, client.Credentials{Token: tok}))
	}
	steps := []struct {
		name string
		file string // "" leaves the file as it is
		tok  string
		want string // the datasets listed, or the refusal's code
	}{
		{"not yet added", "", tokNew, "Unauthenticated"},
		{"added", tokA + " datasets=a\n" + tokNew + " datasets=b\n", tokNew, "b"},
		{"removed", tokNew + " datasets=b\n", tokA, "Unauthenticated"},
		{"malformed file", tokNew + " datasets=b\n" + tokBad + " streams=x\n", tokNew, "b"},
		{"the bad line's token", "", tokBad, "Unauthenticated"},
	}
	for _, s := range steps {
		if s.file != "" {
			writeTokens(t, tokens, s.file)
		}
		got, err := list(s.tok)
		res := strings.Join(got, " ")
		if err != nil {
			res = status.Code(err).String()
		}
		if res != s.want {
			t.Fatalf("%s: got %s (%v), want %s", s.name, res, err, s.want)
		}
	}
	if !strings.Contains(log.String(), "reload failed") || !strings.Contains(log.String(), "line 2") {
		t.Fatalf("no warning naming line 2:\n%s", log)
	}
	if strings.Contains(log.String(), tokBad) {
		t.Fatalf("the warning shows the token:\n%s", log)
	}
}

// TestParseTokens: the file format, and errors that name the line and
// never its token.
func TestParseTokens(t *testing.T) {
	const tok = "abcdefghijklmnop"
	tests := []struct {
		name    string
		file    string
		wantErr []string // parts of the error; none: valid
	}{
		{"all", "# comment\n\n" + tok + " datasets=*\n", nil},
		{"list and limit", "  " + tok + "  datasets=a,b   streams=4  \n", nil},
		{"empty", "# nothing\n", []string{"no tokens"}},
		{"short token", "short datasets=*\n", []string{"line 1: token shorter than 16"}},
		{"no datasets", tok + "\n", []string{"line 1: no datasets="}},
		{"fields first", "datasets=* " + tok + "\n", []string{"line 1: want TOKEN first"}},
		{"unknown field", tok + " datasets=* user=x\n", []string{`line 1: unknown field "user"`}},
		{"bad limit", tok + " datasets=* streams=0\n", []string{"line 1: streams= wants a number"}},
		{"empty name", tok + " datasets=a,,b\n", []string{"line 1: datasets= wants"}},
		{"star in a list", tok + " datasets=a,*\n", []string{"line 1: datasets= wants"}},
		{"twice", tok + " datasets=a\n#\n" + tok + " datasets=b\n", []string{"line 3: the token of line 1 again"}},
		{"every bad line", "x datasets=*\n" + tok + "\n", []string{"line 1:", "line 2:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab, err := parseTokens([]byte(tt.file))
			if len(tt.wantErr) == 0 {
				if err != nil || len(tab.grants) != 1 {
					t.Fatalf("got %v, %v; want one token", tab, err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), tok) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
	tab, _ := parseTokens([]byte(tok + " datasets=a,b streams=3\n"))
	g := tab.lookup(tok)
	if g == nil || !g.may("a") || !g.may("b") || g.may("c") || g.streams != 3 || tab.lookup(tok+"x") != nil || tab.lookup("") != nil {
		t.Fatalf("lookup: %+v", g)
	}
}
