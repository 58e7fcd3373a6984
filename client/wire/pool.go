package wire

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// Pool is a gRPC buffer pool that does not zero the buffers it hands
// out, shared by the daemon and its clients. gRPC overwrites every byte it
// reads or writes, and zeroing a few megabytes per batch message showed up
// as 8% of the daemon's time in profiles.
var Pool mem.BufferPool = &pool{}

type pool struct {
	classes [48]sync.Pool // by power of two of the capacity
}

func (p *pool) Get(n int) *[]byte {
	c := bits.Len(uint(max(n, 256) - 1)) // smallest power of two >= n
	if bp, ok := p.classes[c].Get().(*[]byte); ok {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]byte, n, 1<<c)
	return &b
}

func (p *pool) Put(bp *[]byte) {
	c := cap(*bp)
	if c < 256 || c&(c-1) != 0 || bits.Len(uint(c)) > len(p.classes) {
		return // not one of ours: let the garbage collector have it
	}
	p.classes[bits.Len(uint(c))-1].Put(bp)
}
