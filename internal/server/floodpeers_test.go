package server

import (
	"fmt"
	"net"
	"testing"
	"time"
)

func TestFloodPeersPenalty(t *testing.T) {
	var f floodPeers
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at      time.Duration // after t0
		strike  string        // with hit
		hit     bool
		penalty time.Duration
		refused map[string]bool
	}{
		{at: 0, refused: map[string]bool{"10.0.0.1": false, "": false}},
		{at: 0, hit: true, strike: "10.0.0.1", penalty: 2 * time.Second,
			refused: map[string]bool{"10.0.0.1": true, "10.0.0.2": false}},
		{at: 1999 * time.Millisecond, refused: map[string]bool{"10.0.0.1": true}},
		{at: 2 * time.Second, refused: map[string]bool{"10.0.0.1": false}},
		{at: 3 * time.Second, hit: true, strike: "10.0.0.1", penalty: 4 * time.Second}, // doubles
		{at: 4 * time.Second, hit: true, strike: "10.0.0.1", penalty: 8 * time.Second},
		{at: 11 * time.Second, refused: map[string]bool{"10.0.0.1": true}},
		{at: 10 * time.Minute, hit: true, strike: "10.0.0.1", penalty: 2 * time.Second}, // forgotten
		{at: 10 * time.Minute, hit: true, strike: "", penalty: 0, refused: map[string]bool{"": false}},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		if s.hit {
			if got := f.strike(s.strike, now); got != s.penalty {
				t.Fatalf("step %d: strike(%q) = %v, want %v", i, s.strike, got, s.penalty)
			}
		}
		for k, want := range s.refused {
			if got := f.refused(k, now); got != want {
				t.Fatalf("step %d: refused(%q) = %v, want %v", i, k, got, want)
			}
		}
	}
	// The penalty stops doubling at its bound.
	for i := range 40 {
		if d := f.strike("10.9.9.9", t0.Add(time.Duration(i)*time.Second)); d > floodPenaltyMax {
			t.Fatalf("strike %d: penalty %v past the bound %v", i, d, floodPenaltyMax)
		}
	}
}

// TestFloodPeersBounded: an attacker spreading over addresses cannot grow
// the table past its bound.
func TestFloodPeersBounded(t *testing.T) {
	var f floodPeers
	now := time.Unix(1000, 0)
	for i := range floodPeersMax + 100 {
		f.strike(fmt.Sprintf("k%d", i), now.Add(time.Duration(i)))
	}
	if n := len(f.peers); n > floodPeersMax {
		t.Fatalf("%d peers kept, bound %d", n, floodPeersMax)
	}
	if !f.refused(fmt.Sprintf("k%d", floodPeersMax+99), now.Add(floodPeersMax+99)) {
		t.Fatal("the newest peer was dropped")
	}
}

func TestPeerKey(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 4}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 4}, "2001:db8:1:2::/64"},
		{&net.UnixAddr{Name: "@", Net: "unix"}, ""},
	} {
		if got := peerKey(addrConn{addr: c.addr}); got != c.want {
			t.Errorf("peerKey(%v) = %q, want %q", c.addr, got, c.want)
		}
	}
}

type addrConn struct {
	net.Conn
	addr net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.addr }
