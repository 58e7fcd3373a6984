package server

import (
	"net"
	"strconv"
	"sync"
	"time"
)

// A connection closed as a rapid-reset flood (earlyEnd) only moves the
// flood: its client connects again at once and resets another burst, and
// each round costs the daemon a handshake and a burst of streams, on the
// cores the normal clients need. floodPeers remembers the peer instead —
// its IP address on TCP (its /64 on IPv6, which one host may spread
// over), its user on a Unix socket — and the listener closes that peer's
// new connections unread for a while: first floodPenaltyFirst, doubling
// with each further flood up to floodPenaltyMax, forgotten after
// floodForget without one. A refused connection costs an accept and a
// close. Connections already open are not touched: a trainer beside the
// attacker on the same host keeps its streams, and waits only if it must
// reconnect within the penalty.
const (
	floodPenaltyFirst = 2 * time.Second
	floodPenaltyMax   = 30 * time.Second
	floodForget       = 5 * time.Minute
	floodPeersMax     = 1 << 16 // entries kept; the oldest go first past it
)

// floodPeers is safe for concurrent use; the zero value is ready.
type floodPeers struct {
	mu    sync.Mutex
	peers map[string]*floodPeer
}

type floodPeer struct {
	until, last time.Time // penalty's end; the last flood
	strikes     int
}

// strike records a flood from peer key at now and returns the penalty.
func (f *floodPeers) strike(key string, now time.Time) time.Duration {
	if key == "" {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.peers == nil {
		f.peers = map[string]*floodPeer{}
	}
	p := f.peers[key]
	if p == nil || now.Sub(p.last) > floodForget {
		if p == nil && len(f.peers) >= floodPeersMax {
			f.pruneLocked(now)
		}
		p = &floodPeer{}
		f.peers[key] = p
	}
	p.strikes++
	d := min(floodPenaltyFirst<<min(p.strikes-1, 16), floodPenaltyMax)
	p.last, p.until = now, now.Add(d)
	return d
}

// pruneLocked drops forgotten peers, or, if none is, the one whose last
// flood is oldest: the table stays bounded whatever the addresses.
func (f *floodPeers) pruneLocked(now time.Time) {
	var oldest string
	for k, p := range f.peers {
		if now.Sub(p.last) > floodForget {
			delete(f.peers, k)
		} else if oldest == "" || p.last.Before(f.peers[oldest].last) {
			oldest = k
		}
	}
	if len(f.peers) >= floodPeersMax {
		delete(f.peers, oldest)
	}
}

// refused reports whether peer key is serving a penalty at now.
func (f *floodPeers) refused(key string, now time.Time) bool {
	if key == "" {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.peers[key]
	return p != nil && now.Before(p.until)
}

// peerKey names the peer of c for floodPeers: "" where nothing names it.
func peerKey(c net.Conn) string {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		if ip4 := a.IP.To4(); ip4 != nil {
			return ip4.String()
		}
		return (&net.IPNet{IP: a.IP.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
	}
	if uc, ok := c.(*net.UnixConn); ok {
		if uid, ok := peerUID(uc); ok {
			return "uid:" + strconv.FormatUint(uint64(uid), 10)
		}
	}
	return ""
}
