package pinned

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Callers test with errors.Is; a *SlotError or *ConfigError
// wraps one of them and carries the details.
var (
	// ErrClosed: the pool (or region) is closed. Blocked Leases wake with it.
	ErrClosed = errors.New("pinned: pool closed")
	// ErrBusy: Close found slots still leased; the pool stays open.
	ErrBusy = errors.New("pinned: slots still leased")
	// ErrNotLeased: a release named a slot and generation that is not
	// leased (released twice, a stale handle, or a stale client ack).
	ErrNotLeased = errors.New("pinned: slot not leased")
	// ErrBadIndex: a slot index outside [0, Slots).
	ErrBadIndex = errors.New("pinned: slot index out of range")
	// ErrBadConfig: a Config or Map argument failed validation.
	ErrBadConfig = errors.New("pinned: bad config")
)

// SlotError says which slot and generation an operation was refused for.
type SlotError struct {
	Op    string // "release", "slot"
	Index int
	Gen   uint64
	Err   error // ErrNotLeased or ErrBadIndex
}

func (e *SlotError) Error() string {
	return fmt.Sprintf("pinned: %s slot %d gen %d: %s", e.Op, e.Index, e.Gen,
		strings.TrimPrefix(e.Err.Error(), "pinned: "))
}

func (e *SlotError) Unwrap() error { return e.Err }

// ConfigError lists every problem found in a Config, not just the first.
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string {
	return "pinned: bad config: " + strings.Join(e.Problems, "; ")
}

func (e *ConfigError) Unwrap() error { return ErrBadConfig }
