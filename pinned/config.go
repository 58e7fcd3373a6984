package pinned

import (
	"fmt"
	"math"
	"os"
	"strings"
)

// Limits on a pool. MaxRegion bounds the whole mapping; MaxSlots bounds the
// bookkeeping (HandleRing handles of ~64 bytes per slot).
const (
	MaxRegion  int64 = 64 << 30
	MaxSlots         = 1 << 16
	maxNameLen       = 200 // memfd names are capped at 249 bytes by the kernel
)

// Config sizes a pool.
type Config struct {
	SlotSize int  // bytes per slot, rounded up to a page
	Slots    int  // number of slots
	Shared   bool // back the region with a memfd another process can map
	NoLock   bool // do not try mlock
	Name     string
}

// pageSize is the granularity slots are rounded to.
var pageSize = os.Getpagesize()

// roundPage rounds n up to a whole number of pages.
func roundPage(n int64) int64 {
	p := int64(pageSize)
	return (n + p - 1) / p * p
}

// validate checks cfg and returns the page-rounded slot size and the total
// region size. Every problem is reported at once.
func (cfg Config) validate() (slot, total int64, err error) {
	var probs []string
	if cfg.Slots <= 0 {
		probs = append(probs, fmt.Sprintf("Slots = %d, want > 0", cfg.Slots))
	} else if cfg.Slots > MaxSlots {
		probs = append(probs, fmt.Sprintf("Slots = %d, want <= %d", cfg.Slots, MaxSlots))
	}
	if cfg.SlotSize <= 0 {
		probs = append(probs, fmt.Sprintf("SlotSize = %d, want > 0", cfg.SlotSize))
	} else if int64(cfg.SlotSize) > MaxRegion {
		probs = append(probs, fmt.Sprintf("SlotSize = %d, want <= %d (64 GiB)", cfg.SlotSize, MaxRegion))
	}
	if len(cfg.Name) > maxNameLen {
		probs = append(probs, fmt.Sprintf("Name is %d bytes, want <= %d", len(cfg.Name), maxNameLen))
	}
	if strings.IndexByte(cfg.Name, 0) >= 0 {
		probs = append(probs, "Name contains a NUL byte")
	}
	if len(probs) == 0 {
		slot = roundPage(int64(cfg.SlotSize))
		// slot <= 64 GiB and Slots <= 65536, so the product fits in int64.
		total = slot * int64(cfg.Slots)
		if total > MaxRegion || total > math.MaxInt {
			probs = append(probs, fmt.Sprintf("Slots*SlotSize = %d*%d = %d bytes after page rounding, want <= %d (64 GiB)",
				cfg.Slots, slot, total, MaxRegion))
		}
	}
	if len(probs) > 0 {
		return 0, 0, &ConfigError{Problems: probs}
	}
	return slot, total, nil
}
