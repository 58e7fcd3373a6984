package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// fdBroker hands each shared-memory stream's region to its client over a
// Unix socket with SCM_RIGHTS: a read-only descriptor of the sealed memfd,
// for the client that presents the stream's token. Unlike opening
// /proc/<pid>/fd/<n>, this works across PID namespaces, containers that
// share only the socket's directory, and users, and reaches nothing else
// of the daemon's. It is safe for concurrent use.
type fdBroker struct {
	mu      sync.Mutex
	streams map[string]*streamSlots // by token
	lis     net.Listener
	closed  bool
}

const tokenLen = 32

func newFdBroker() *fdBroker { return &fdBroker{streams: map[string]*streamSlots{}} }

// register makes slots' region available for the returned token until
// unregister.
func (b *fdBroker) register(slots *streamSlots) []byte {
	tok := make([]byte, tokenLen)
	rand.Read(tok) // never fails (crypto/rand, Go 1.24+)
	b.mu.Lock()
	b.streams[string(tok)] = slots
	b.mu.Unlock()
	return tok
}

func (b *fdBroker) unregister(tok []byte) {
	b.mu.Lock()
	delete(b.streams, string(tok))
	b.mu.Unlock()
}

// serve answers hand-over requests on lis until close.
func (b *fdBroker) serve(lis net.Listener) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		lis.Close()
		return nil
	}
	b.lis = lis
	b.mu.Unlock()
	for {
		c, err := lis.Accept()
		if err != nil {
			b.mu.Lock()
			closed := b.closed
			b.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("fd socket: %w", err)
		}
		go b.handle(c.(*net.UnixConn))
	}
}

func (b *fdBroker) close() {
	b.mu.Lock()
	b.closed = true
	lis := b.lis
	b.mu.Unlock()
	if lis != nil {
		lis.Close()
	}
}

// handle runs one exchange: one byte len(token) and the token in; one
// byte 0 with the descriptor, or 1 and a message, out.
func (b *fdBroker) handle(c *net.UnixConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var n [1]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return
	}
	if n[0] != tokenLen {
		c.Write(append([]byte{1}, fmt.Sprintf("loaderd: token of %d bytes, want %d", n[0], tokenLen)...))
		return
	}
	tok := make([]byte, tokenLen)
	if _, err := io.ReadFull(c, tok); err != nil {
		return
	}
	b.mu.Lock()
	slots := b.streams[string(tok)]
	if slots != nil {
		slots.retain() // the pool stays mapped while we reopen its memfd
	}
	b.mu.Unlock()
	if slots == nil {
		c.Write(append([]byte{1}, "loaderd: unknown token: the stream has ended, or never was"...))
		return
	}
	f, err := slots.pool.OpenReadOnly()
	slots.drop()
	if err != nil {
		c.Write(append([]byte{1}, err.Error()...))
		return
	}
	defer f.Close()
	c.WriteMsgUnix([]byte{0}, unix.UnixRights(int(f.Fd())), nil)
}
