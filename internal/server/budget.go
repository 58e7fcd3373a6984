package server

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loaderd/loaderd/internal/bytesize"
)

// ErrOverBudget: the daemon's memory limit leaves no room for what was asked.
var ErrOverBudget = errors.New("over the daemon's memory limit")

// Kinds of memory the budget counts.
const (
	memStream  = "stream"  // pinned pools of open streams, and pools gRPC or clients still read
	memIdle    = "idle"    // pinned pools kept warm for reuse
	memScratch = "scratch" // the workers' sample and decode buffers
	memDecode  = "decode"  // decodes of large images in progress (imagedec's memory gate)
	memNames   = "names"   // SampleNames pages being built
	memGet     = "get"     // GetSamples responses being built, and their decode scratch
)

// budget is the daemon-wide memory bound. Every pinned pool is reserved
// before it is mapped, so a stream that does not fit is refused before a
// byte is touched, instead of being granted by swapping the host to death.
// It is safe for concurrent use.
type budget struct {
	mu    sync.Mutex
	freed *sync.Cond // broadcast when bytes are released
	limit int64
	used  map[string]int64
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit, used: map[string]int64{}}
	b.freed = sync.NewCond(&b.mu)
	return b
}

func (b *budget) totalLocked() int64 {
	var t int64
	for _, n := range b.used {
		t += n
	}
	return t
}

// reserve counts n more bytes of kind, or fails naming what is left.
func (b *budget) reserve(kind string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if free := b.limit - b.totalLocked(); n > free {
		return fmt.Errorf("%w: needs %s, %s of %s free", ErrOverBudget, bytesize.Format(n), bytesize.Format(max(free, 0)), bytesize.Format(b.limit))
	}
	b.used[kind] += n
	return nil
}

func (b *budget) release(kind string, n int64) {
	b.mu.Lock()
	b.used[kind] -= n
	b.mu.Unlock()
	b.freed.Broadcast()
}

// reserveWait is reserve that waits up to wait for others to release
// what n needs; n more than the whole limit fails at once.
func (b *budget) reserveWait(kind string, n int64, wait time.Duration) error {
	if n > b.limit {
		return b.reserve(kind, n) // the error names the limit
	}
	deadline := time.Now().Add(wait)
	timer := time.AfterFunc(wait, b.freed.Broadcast) // wakes the last wait
	defer timer.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if free := b.limit - b.totalLocked(); n <= free {
			b.used[kind] += n
			return nil
		}
		if !time.Now().Before(deadline) {
			free := b.limit - b.totalLocked()
			return fmt.Errorf("%w: needs %s, %s of %s free after waiting %v", ErrOverBudget, bytesize.Format(n),
				bytesize.Format(max(free, 0)), bytesize.Format(b.limit), wait)
		}
		b.freed.Wait()
	}
}

// decodeGate is imagedec's memory gate on the budget: a large image's
// decode takes the memory of idle pools if it must, then waits for room
// (other decodes finish) up to decodeWait.
type decodeGate struct {
	b     *budget
	evict func() bool // unmaps an idle pool; false when there is none
}

// decodeWait bounds how long a decode waits for memory before its sample
// fails (and the stream's fault policy decides).
const decodeWait = 30 * time.Second

func (g decodeGate) Acquire(n int64) error {
	for g.b.reserve(memDecode, n) != nil {
		if !g.evict() {
			return g.b.reserveWait(memDecode, n, decodeWait)
		}
	}
	return nil
}
func (g decodeGate) Release(n int64) { g.b.release(memDecode, n) }

// move recounts n bytes from one kind to another.
func (b *budget) move(from, to string, n int64) {
	b.mu.Lock()
	b.used[from] -= n
	b.used[to] += n
	b.mu.Unlock()
	b.freed.Broadcast()
}

func (b *budget) inUse(kind string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used[kind]
}

// DefaultMemoryLimit is half of the memory this process may use: the
// cgroup's limit (memory.max, v2) where one is set, else the machine's
// (/proc/meminfo, or sysctl hw.memsize on macOS); 4 GiB when neither is
// known. Half leaves the rest to the trainer beside the daemon, to the page
// cache that holds the dataset, and to the Go heap.
func DefaultMemoryLimit() int64 {
	total := memTotal()
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	if total <= 0 {
		return 4 << 30
	}
	return total / 2
}

func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return physMem() // not Linux (see physmem_*.go)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
