package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"
)

// PoolConfig tunes a stream over a pool of daemons: a Client dialled with
// several addresses ("host1:50051,host2:50051") or a name that resolves to
// several ("dns:///loaderd-pool:50051").
type PoolConfig struct {
	// Window is the most batches wanted of one daemon and not yet
	// received; default 4.
	Window int
	// FailoverAfter is how long a daemon may stay silent while it owes
	// batches before the stream drops it and asks its batches of the
	// others; default 3 s, and never less than eight of the daemon's own
	// batch times, so a slow daemon is not taken for a lost one.
	FailoverAfter time.Duration
	// Resolve is how often a dns:/// name is looked up again, so daemons
	// added to it take work; default 30 s.
	Resolve time.Duration
	// ConnectTimeout bounds one attempt to open a daemon's stream; default
	// 2 s. A daemon that does not answer is tried again, backing off to
	// once every 2 s, for as long as the stream is open.
	ConnectTimeout time.Duration
	// OnEvent is told of daemons lost, back, added and refused, and when
	// every daemon is gone; nil logs them with slog.Default. It is called
	// from the stream's scheduler and must not block.
	OnEvent func(PoolEvent)
}

// PoolEventKind says what happened to a pool's daemon.
type PoolEventKind int

// The kinds of PoolEvent.
const (
	DaemonUp      PoolEventKind = iota + 1 // a daemon's stream opened (at start, back, or added)
	DaemonDown                             // a daemon failed or fell silent; its batches go to the others
	DaemonRefused                          // a daemon serves other bytes or another shape than the pool
	AllDown                                // no daemon is up: the stream waits for one to come back
)

func (k PoolEventKind) String() string {
	switch k {
	case DaemonUp:
		return "up"
	case DaemonDown:
		return "down"
	case DaemonRefused:
		return "refused"
	case AllDown:
		return "all down"
	}
	return fmt.Sprintf("PoolEventKind(%d)", int(k))
}

// PoolEvent is one change in a pool stream's daemons.
type PoolEvent struct {
	Kind  PoolEventKind
	Addr  string   // the daemon; empty for AllDown
	Addrs []string // AllDown: every daemon the stream knows
	Err   error    // why it went down or was refused
	Moved int      // DaemonDown: batches it owed, now asked of the others
}

func (e PoolEvent) String() string {
	switch e.Kind {
	case AllDown:
		return fmt.Sprintf("loaderd pool: every daemon is down (%s): waiting for one to come back: %v", strings.Join(e.Addrs, ", "), e.Err)
	case DaemonDown:
		return fmt.Sprintf("loaderd pool: daemon %s down, %d batches asked of the others: %v", e.Addr, e.Moved, e.Err)
	case DaemonRefused:
		return fmt.Sprintf("loaderd pool: daemon %s refused: %v", e.Addr, e.Err)
	}
	return fmt.Sprintf("loaderd pool: daemon %s %v", e.Addr, e.Kind)
}

// PoolMember is one daemon of a pool stream, as Stream.Pool reports it.
type PoolMember struct {
	Addr        string
	Up          bool
	Made        int64         // batches it made that the stream used
	Outstanding int           // batches wanted of it and not yet received
	BatchTime   time.Duration // its recent time per batch
	Connects    int           // streams opened to it
}

func (c *PoolConfig) defaults() {
	if c.Window <= 0 {
		c.Window = 4
	}
	if c.FailoverAfter <= 0 {
		c.FailoverAfter = 3 * time.Second
	}
	if c.Resolve <= 0 {
		c.Resolve = 30 * time.Second
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 2 * time.Second
	}
	if c.OnEvent == nil {
		c.OnEvent = func(e PoolEvent) {
			if e.Kind == DaemonUp {
				slog.Info(e.String())
				return
			}
			slog.Warn(e.String())
		}
	}
}

// poolTarget is what a pool target names: fixed addresses, or a DNS name
// and port to resolve.
type poolTarget struct {
	addrs      []string
	host, port string // dns:///host:port
}

// parsePool reads a pool target: a comma-separated list of host:port (or
// unix:///path, for daemons on this host), or dns:///host:port (an
// authority, dns://AUTH/host:port, is ignored: the system resolver
// answers). It returns nil for any other target.
func parsePool(target string) (*poolTarget, error) {
	if rest, ok := strings.CutPrefix(target, "dns://"); ok {
		_, hostport, _ := strings.Cut(rest, "/")
		host, port, err := net.SplitHostPort(hostport)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("client: pool target %q: want dns:///HOST:PORT", target)
		}
		return &poolTarget{host: host, port: port}, nil
	}
	if !strings.Contains(target, ",") {
		return nil, nil
	}
	p := &poolTarget{}
	for a := range strings.SplitSeq(target, ",") {
		a = strings.TrimSpace(a)
		if unixPath(a) != "" {
			p.addrs = append(p.addrs, a)
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("client: pool target %q: address %q: want HOST:PORT", target, a)
		}
		if !slices.Contains(p.addrs, a) {
			p.addrs = append(p.addrs, a)
		}
	}
	return p, nil
}

// memberTarget is the gRPC target of one daemon of a pool: an address
// taken as it is, not resolved again.
func memberTarget(addr string) string {
	if unixPath(addr) != "" {
		return addr
	}
	return "passthrough:///" + addr
}

// resolve returns the pool's addresses now.
func (p *poolTarget) resolve(ctx context.Context) ([]string, error) {
	if p.host == "" {
		return p.addrs, nil
	}
	ips, err := net.DefaultResolver.LookupHost(ctx, p.host)
	if err != nil {
		return nil, fmt.Errorf("client: resolve %s: %w", p.host, err)
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip, p.port))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (p *poolTarget) String() string {
	if p.host != "" {
		return "dns:///" + net.JoinHostPort(p.host, p.port)
	}
	return strings.Join(p.addrs, ",")
}

// errNoFingerprint: without a fingerprint the pool cannot check that a
// daemon serves the same bytes.
var errNoFingerprint = errors.New("no dataset fingerprint (a daemon that predates pools), so the pool cannot check it serves the same bytes")
