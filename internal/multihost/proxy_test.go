//go:build linux && !race

package multihost

import (
	"net"
	"sync"
	"time"
)

// The fault proxy's bad network: every chunk it forwards is held
// chunkDelay, every 64th chunk of a direction a further hiccup (well under
// a failover), and Stall holds everything.
const (
	chunkDelay = 20 * time.Millisecond
	hiccup     = 200 * time.Millisecond
)

// faultProxy stands between the trainer and one daemon, in the trainer's
// process, where tc-netem is missing (and beside it where it is not): it
// slows a link the way a congested one does, and stalls it the way a
// stuck middlebox does, without closing anything.
type faultProxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	until time.Time // everything waits until then
}

func startProxy(to string) (*faultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &faultProxy{ln: ln, to: to}
	go p.serve()
	return p, nil
}

// Addr is where the trainer dials instead of the daemon.
func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// Stall holds every connection's data for d from now.
func (p *faultProxy) Stall(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.until = time.Now().Add(d)
}

func (p *faultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

// handle joins one trainer connection to a new one to the daemon; either
// side closing closes both.
func (p *faultProxy) handle(c net.Conn) {
	d, err := net.Dial("tcp", p.to)
	if err != nil {
		c.Close()
		return
	}
	var once sync.Once
	closeBoth := func() { c.Close(); d.Close() }
	go func() { p.pipe(d, c); once.Do(closeBoth) }()
	p.pipe(c, d)
	once.Do(closeBoth)
}

func (p *faultProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for n := 1; ; n++ {
		k, err := src.Read(buf)
		if k > 0 {
			p.hold(n)
			if _, err := dst.Write(buf[:k]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hold delays the nth chunk of a direction.
func (p *faultProxy) hold(n int) {
	time.Sleep(chunkDelay)
	if n%64 == 0 {
		time.Sleep(hiccup)
	}
	for {
		p.mu.Lock()
		wait := time.Until(p.until)
		p.mu.Unlock()
		if wait <= 0 {
			return
		}
		time.Sleep(wait)
	}
}
