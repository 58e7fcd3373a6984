package server

import (
	"net"
	"sync"
	"time"
)

// The daemon's listeners hand gRPC connections it can close itself: gRPC
// has no call that ends one connection, and a flood's connection must end
// (see closeFlood). Each accepted connection reports a *connAddr as its
// remote address; gRPC passes that to connTracker.TagConn as the peer's
// address, which is how the connection's connRefs finds its net.Conn.

// trackListener wraps a listener's connections as trackedConns, and
// closes at once those of a peer floods names (floodpeers.go).
type trackListener struct {
	net.Listener
	floods  *floodPeers
	refused func(peer string) // counts a connection refused so
}

func (l trackListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := peerKey(c)
		if l.floods.refused(key, time.Now()) {
			c.Close()
			l.refused(key)
			continue
		}
		t := &trackedConn{Conn: c}
		t.addr = &connAddr{peer: c.RemoteAddr(), conn: t, key: key}
		return t, nil
	}
}

type trackedConn struct {
	net.Conn
	addr *connAddr
}

func (c *trackedConn) RemoteAddr() net.Addr { return c.addr }

// connAddr is the peer's address, as the connection's own reports it (nil
// for an unnamed Unix socket peer), and the connection.
type connAddr struct {
	peer net.Addr
	conn net.Conn
	key  string // peerKey
}

func (a *connAddr) Network() string {
	if a.peer == nil {
		return "unix"
	}
	return a.peer.Network()
}

func (a *connAddr) String() string {
	if a.peer == nil {
		return ""
	}
	return a.peer.String()
}

// connCloser closes one connection once; it is safe for concurrent use.
type connCloser struct {
	once sync.Once
	conn net.Conn // nil when the listener was not a trackListener
	peer string   // the peer's floodPeers key
}

// key is the peer's floodPeers key ("" for none).
func (c *connCloser) key() string {
	if c == nil {
		return ""
	}
	return c.peer
}

// close ends the connection: gRPC's reader fails, and the connection's
// streams end as if the client had gone.
func (c *connCloser) close() bool {
	if c == nil || c.conn == nil {
		return false
	}
	closed := false
	c.once.Do(func() { closed = c.conn.Close() == nil })
	return closed
}
