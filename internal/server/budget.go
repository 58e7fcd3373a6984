package server

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ErrOverBudget: the daemon's memory limit leaves no room for what was asked.
var ErrOverBudget = errors.New("over the daemon's memory limit")

// Kinds of memory the budget counts.
const (
	memStream  = "stream"  // pinned pools of open streams, and pools gRPC or clients still read
	memIdle    = "idle"    // pinned pools kept warm for reuse
	memScratch = "scratch" // the workers' sample and decode buffers
)

// budget is the daemon-wide memory bound. Every pinned pool is reserved
// before it is mapped, so a stream that does not fit is refused before a
// byte is touched, instead of being granted by swapping the host to death.
// It is safe for concurrent use.
type budget struct {
	mu    sync.Mutex
	limit int64
	used  map[string]int64
}

func newBudget(limit int64) *budget { return &budget{limit: limit, used: map[string]int64{}} }

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
		return fmt.Errorf("%w: needs %s, %s of %s free", ErrOverBudget, bytesString(n), bytesString(max(free, 0)), bytesString(b.limit))
	}
	b.used[kind] += n
	return nil
}

func (b *budget) release(kind string, n int64) {
	b.mu.Lock()
	b.used[kind] -= n
	b.mu.Unlock()
}

// move recounts n bytes from one kind to another.
func (b *budget) move(from, to string, n int64) {
	b.mu.Lock()
	b.used[from] -= n
	b.used[to] += n
	b.mu.Unlock()
}

func (b *budget) inUse(kind string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used[kind]
}

// DefaultMemoryLimit is half of the memory this process may use: the
// cgroup's limit (memory.max, v2) where one is set, else the machine's.
// Half leaves the rest to the trainer beside the daemon, to the page cache
// that holds the dataset, and to the Go heap.
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
		return 0
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

// bytesString prints n in the largest binary unit that keeps it readable.
func bytesString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ParseBytes parses a size such as 2GiB, 512MiB, 1.5G or 1048576.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v < 0 || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("size %q: want a number of bytes, optionally with KiB, MiB, GiB or TiB", s)
	}
	return int64(v * float64(mult)), nil
}
