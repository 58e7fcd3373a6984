package s3test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is what the proxy does to one request instead of forwarding it
// faithfully.
type Fault int

const (
	// SlowDown answers 503 with S3's SlowDown error: throttling.
	SlowDown Fault = iota + 1
	// Reset closes the connection with a TCP RST before any response.
	Reset
	// Truncate sends the server's headers and half its body, then drops
	// the connection: a body cut short.
	Truncate
	// Stall sends the headers and half the body, then nothing until the
	// client gives up: a half-dead connection.
	Stall
	// Hang answers nothing at all until the client gives up: a timeout
	// before the response.
	Hang
	// ServerError answers 500 with S3's InternalError: a failing server.
	ServerError
	// NoBody sends the server's headers (its Content-Length included) and
	// none of its body, then drops the connection: a body cut short at its
	// first byte, so a resumed read makes no progress either.
	NoBody
)

func (f Fault) String() string {
	return map[Fault]string{SlowDown: "slowdown", Reset: "reset", Truncate: "truncate", Stall: "stall", Hang: "hang", ServerError: "500", NoBody: "nobody"}[f]
}

type rule struct {
	fault  Fault
	method string // "" any
	match  string // substring of the path
	left   int
}

// Proxy forwards S3 requests to a Server, injecting faults by rule. The
// Host header is forwarded as the client signed it, so SigV4 holds.
type Proxy struct {
	URL string // http://127.0.0.1:PORT, the endpoint clients use

	target string
	tr     *http.Transport
	mu     sync.Mutex
	rules  []*rule
	counts map[string]int // method+" "+fault (or "ok"), for assertions
}

// NewProxy starts a proxy in front of s, stopped when tb ends.
func NewProxy(tb testing.TB, s *Server) *Proxy {
	p := &Proxy{target: strings.TrimPrefix(s.Endpoint, "http://"), tr: &http.Transport{}, counts: map[string]int{}}
	ts := httptest.NewServer(http.HandlerFunc(p.serve))
	tb.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		p.tr.CloseIdleConnections()
	})
	p.URL = ts.URL
	return p
}

// Inject makes the next n requests with this method (GET, HEAD; "" any)
// whose path contains match suffer fault f.
func (p *Proxy) Inject(f Fault, n int, method, match string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &rule{fault: f, method: method, match: match, left: n})
}

// Clear drops the rules not used up.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Count returns how many requests with method got fault f, or were
// forwarded intact for f == 0.
func (p *Proxy) Count(method string, f Fault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[method+" "+f.String()]
}

func (p *Proxy) pick(r *http.Request) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := Fault(0)
	for _, ru := range p.rules {
		if ru.left > 0 && (ru.method == "" || ru.method == r.Method) && strings.Contains(r.URL.Path, ru.match) {
			ru.left--
			f = ru.fault
			break
		}
	}
	p.counts[r.Method+" "+f.String()]++
	return f
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	f := p.pick(r)
	switch f {
	case SlowDown:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		if r.Method != http.MethodHead {
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
		}
		return
	case ServerError:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusInternalServerError)
		if r.Method != http.MethodHead {
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>`)
		}
		return
	case Hang:
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		return
	case Reset:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // RST, not FIN
			}
			conn.Close()
		}
		return
	}
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host, out.RequestURI = "http", p.target, ""
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if f == 0 || resp.StatusCode >= 300 || resp.ContentLength < 2 {
		io.Copy(w, resp.Body)
		return
	}
	if f != NoBody {
		io.CopyN(w, resp.Body, resp.ContentLength/2)
	}
	w.(http.Flusher).Flush()
	if f == Stall {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}
	panic(http.ErrAbortHandler) // drop the connection mid-body, quietly
}
