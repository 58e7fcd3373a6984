package cache

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/loaderd/loaderd/internal/bytesize"
	"github.com/loaderd/loaderd/loader"
)

// ErrConfig reports a cache that cannot be built as asked: a bad option,
// or a size the dataset does not allow.
var ErrConfig = errors.New("invalid cache")

// Config sizes a Cache.
type Config struct {
	// Bytes bounds the arena that holds the pixels (labels and the entry
	// table come on top, see Stats.Overhead). 0 means the whole decoded
	// dataset, which only a source of fixed-size images can say; one of
	// varying size needs a bound.
	Bytes int64
}

// Entry states: the word holds stEmpty, stFilling, or stReady plus the
// entry's offset in the arena.
const (
	stEmpty   = 0
	stFilling = 1
	stReady   = 2
)

// entry is one sample's slot. label, h and w are written only by the
// worker that moved st from empty to filling, before it publishes st as
// ready; they are read only after st is seen ready.
type entry struct {
	st    atomic.Uint64
	label int32
	h, w  uint32 // the image's size, for sources of varying size
}

// stripes spreads the hit and miss counters over cache lines, by sample
// index: workers read random samples, so they rarely add to the same one.
const stripes = 8

type counter struct {
	n atomic.Int64
	_ [56]byte
}

// Cache is a loader.Source that keeps the decoded pixels of the samples
// it admits (see the package documentation). It owns the source it
// wraps: Close closes it. It is a loader.Wrapper of that source, so it
// has the source's capabilities (loader.Caps), no more: Sample,
// SampleSized (of a source of varying size) and Label serve what is
// cached, and the other optional interfaces pass through.
type Cache struct {
	// What a hit reads comes first, away from the counters workers write.
	ents    []entry
	arena   []byte
	sample  int64 // bytes of one fixed-size sample; 0 when sizes vary
	ch      int64 // channels
	varying bool  // the source's images vary in size (a loader.SizedSource)
	closed  atomic.Bool

	loader.Wrapper
	name string

	used    atomic.Int64 // arena bytes handed out (bump pointer)
	full    atomic.Bool  // no sample fits any more (fixed-size samples)
	entries atomic.Int64
	hits    [stripes]counter
	misses  [stripes]counter

	closeOnce sync.Once
	closeErr  error
}

// New wraps src in a cache sized by cfg. On error src is left open, for
// the caller to close.
func New(src loader.Source, cfg Config) (*Cache, error) {
	spec := src.Spec()
	n := src.Len()
	c := &Cache{Wrapper: loader.Wrap(src), name: src.String(), ch: int64(spec.C)}
	if spec.H == 0 && spec.W == 0 {
		if !c.Caps().Has(loader.CapSized) {
			return nil, fmt.Errorf("cache: %s: images of varying size but no loader.SizedSource: %w", src, ErrConfig)
		}
		if cfg.Bytes <= 0 {
			return nil, fmt.Errorf("cache: %s: images of varying size need cache_bytes=SIZE: %w", src, ErrConfig)
		}
		c.varying = true
	} else {
		c.sample = int64(spec.Bytes())
		if cfg.Bytes < 0 {
			return nil, fmt.Errorf("cache: %s: cache_bytes %d is negative: %w", src, cfg.Bytes, ErrConfig)
		}
		whole := n * c.sample
		if cfg.Bytes == 0 || cfg.Bytes > whole {
			cfg.Bytes = whole // no more than the whole dataset
		}
		if cfg.Bytes < c.sample {
			return nil, fmt.Errorf("cache: %s: cache_bytes %s holds no sample of %s: %w",
				src, bytesize.Format(cfg.Bytes), bytesize.Format(c.sample), ErrConfig)
		}
		cfg.Bytes -= cfg.Bytes % c.sample // whole samples only
	}
	arena, err := newArena(cfg.Bytes)
	if err != nil {
		return nil, fmt.Errorf("cache: %s: arena of %s: %w", src, bytesize.Format(cfg.Bytes), err)
	}
	c.arena = arena
	c.ents = make([]entry, n)
	// A view read after Close faults inside this range: ErrFault, no crash.
	loader.RegisterMapping(c.arena, "decoded cache of "+c.name)
	return c, nil
}

// Sample implements loader.Source: the cached pixels, a view of the arena
// valid for good, or the source's (admitted into the cache if there is
// room). Sources of varying size are read at full size.
func (c *Cache) Sample(i int64, scratch []byte) (int32, []byte, error) {
	if c.closed.Load() {
		return 0, nil, &loader.RecordError{File: c.String(), Record: i, Err: loader.ErrClosed}
	}
	if uint64(i) >= uint64(len(c.ents)) {
		return c.Wrapper.Sample(i, scratch) // the source names its own bad index
	}
	e := &c.ents[i]
	if st := e.st.Load(); st >= stReady {
		c.hits[i&(stripes-1)].n.Add(1)
		return e.label, c.view(e, st), nil
	}
	c.misses[i&(stripes-1)].n.Add(1)
	if c.varying {
		label, pix, dec, err := c.Wrapper.SampleSized(i, scratch, nil)
		if err == nil && dec.Scale == 1 && dec.Whole() {
			c.admit(e, label, pix, dec.H, dec.W)
		}
		return label, pix, err
	}
	label, pix, err := c.Wrapper.Sample(i, scratch)
	if err == nil {
		c.admit(e, label, pix, 0, 0)
	}
	return label, pix, err
}

// SampleSized implements loader.SizedSource. A cached image is served
// when the caller's want takes it at full size (scale 1), whole even where
// the caller would read a crop of it (the Decoded says so); for a scaled
// decode the source decodes it as it would without the cache. (A cache of
// a source of fixed-size images has no loader.CapSized: its SampleSized
// is Sample at the Spec's size.)
func (c *Cache) SampleSized(i int64, scratch []byte, want loader.Scaler) (label int32, pix []byte, dec loader.Decoded, err error) {
	if !c.varying {
		label, pix, err = c.Sample(i, scratch)
		s := c.Spec()
		return label, pix, loader.WholeImage(s.H, s.W, 1), err
	}
	if c.closed.Load() {
		return 0, nil, loader.Decoded{}, &loader.RecordError{File: c.String(), Record: i, Err: loader.ErrClosed}
	}
	if uint64(i) >= uint64(len(c.ents)) {
		return c.Wrapper.SampleSized(i, scratch, want)
	}
	e := &c.ents[i]
	if st := e.st.Load(); st >= stReady {
		h, w := int(e.h), int(e.w)
		if want == nil || want.Want(h, w).Scale <= 1 {
			c.hits[i&(stripes-1)].n.Add(1)
			return e.label, c.view(e, st), loader.WholeImage(h, w, 1), nil
		}
	}
	c.misses[i&(stripes-1)].n.Add(1)
	if want != nil && !c.full.Load() && e.st.Load() == stEmpty {
		// A crop could not be cached: while there may be room, ask for
		// the whole image.
		ws := wholes.Get().(*whole)
		ws.Scaler = want
		label, pix, dec, err = c.Wrapper.SampleSized(i, scratch, ws)
		ws.Scaler = nil
		wholes.Put(ws)
	} else {
		label, pix, dec, err = c.Wrapper.SampleSized(i, scratch, want)
	}
	if err == nil && dec.Scale == 1 && dec.Whole() {
		c.admit(e, label, pix, dec.H, dec.W)
	}
	return label, pix, dec, err
}

// whole is a loader.Scaler's request without its crop, so that the
// source decodes whole images; pooled, so a miss allocates nothing.
type whole struct{ loader.Scaler }

// Want implements loader.Scaler: the scale asked for, no crop.
func (w *whole) Want(h, wd int) loader.Want {
	return loader.Want{Scale: w.Scaler.Want(h, wd).Scale}
}

var wholes = sync.Pool{New: func() any { return new(whole) }}

// view returns the pixels of a ready entry.
func (c *Cache) view(e *entry, st uint64) []byte {
	off := int64(st - stReady)
	n := c.sample
	if c.varying {
		n = int64(e.h) * int64(e.w) * c.ch
	}
	return c.arena[off : off+n : off+n]
}

// admit copies a sample just read into the arena, if it has room and no
// other worker got there first.
func (c *Cache) admit(e *entry, label int32, pix []byte, h, w int) {
	n := int64(len(pix))
	if c.full.Load() || n == 0 || (c.varying && n != int64(h)*int64(w)*c.ch) {
		return
	}
	if !e.st.CompareAndSwap(stEmpty, stFilling) {
		return // being filled, or filled, by another worker
	}
	off, ok := c.reserve(n)
	if !ok {
		e.st.Store(stEmpty)
		return
	}
	c.fill(e, off, pix)
	e.label, e.h, e.w = label, uint32(h), uint32(w)
	e.st.Store(stReady + uint64(off)) // publish: the bytes and fields are written
	c.entries.Add(1)
}

// reserve bumps the arena's pointer by n bytes.
func (c *Cache) reserve(n int64) (int64, bool) {
	for {
		u := c.used.Load()
		if u+n > int64(len(c.arena)) {
			if !c.varying || u == int64(len(c.arena)) {
				c.full.Store(true) // static admission: the cache is complete
			}
			return 0, false
		}
		if c.used.CompareAndSwap(u, u+n) {
			return u, true
		}
	}
}

// fill copies pix into the arena. pix may be a view of a mapped file that
// shrank (a CIFAR or Arrow source): the copy then faults, and the entry
// goes back to empty before the fault reaches the loader's guard.
func (c *Cache) fill(e *entry, off int64, pix []byte) {
	defer func() {
		if r := recover(); r != nil {
			e.st.Store(stEmpty) // its bytes stay reserved, unused
			panic(r)
		}
	}()
	copy(c.arena[off:], pix)
}

// String names the source as FORMAT:PATH with the cache's options.
func (c *Cache) String() string {
	sep := "?"
	if strings.Contains(c.name, "?") {
		sep = "&"
	}
	return c.name + sep + "cache=decoded&cache_bytes=" + strconv.Itoa(len(c.arena))
}

// Source returns the source the cache wraps (as Unwrap does).
func (c *Cache) Source() loader.Source { return c.Unwrap() }

// Label implements loader.Labeler: the cached label, else the source's
// (without decoding when the source is a Labeler; through Sample, which
// admits the sample, when it is not).
func (c *Cache) Label(i int64) (int32, error) {
	if uint64(i) < uint64(len(c.ents)) && !c.closed.Load() {
		if e := &c.ents[i]; e.st.Load() >= stReady {
			return e.label, nil
		}
	}
	if c.Caps().Has(loader.CapLabeler) {
		return c.Wrapper.Label(i)
	}
	need := c.sample
	if c.varying {
		need = c.MaxPixels() * c.ch
	}
	label, _, err := c.Sample(i, make([]byte, need))
	return label, err
}

// Stats are a cache's counters, read together (each one atomically, not
// all at one instant).
type Stats struct {
	Hits      int64 // reads served from the cache
	Misses    int64 // reads the source served (errors included)
	Evictions int64 // entries dropped to make room: always 0, static admission never evicts
	Entries   int64 // samples cached
	Len       int64 // samples in the dataset
	Bytes     int64 // arena bytes in use
	Capacity  int64 // arena bytes
	Overhead  int64 // the entry table: labels, sizes and states
}

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	s := Stats{Entries: c.entries.Load(), Len: int64(len(c.ents)), Bytes: c.used.Load(),
		Capacity: int64(len(c.arena)), Overhead: c.Overhead()}
	for k := range stripes {
		s.Hits += c.hits[k].n.Load()
		s.Misses += c.misses[k].n.Load()
	}
	return s
}

// Overhead returns the bytes of the entry table.
func (c *Cache) Overhead() int64 { return int64(len(c.ents)) * entrySize }

// Reserved returns the memory the cache may come to hold: the arena and
// the entry table. A daemon counts it in its memory budget.
func (c *Cache) Reserved() int64 { return int64(len(c.arena)) + c.Overhead() }

// Close drops the cached pixels and closes the source. The arena's memory
// goes back to the system; see the package documentation for a view read
// after Close.
func (c *Cache) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		dropArena(c.arena)
		c.closeErr = c.Wrapper.Close()
	})
	return c.closeErr
}

var (
	_ loader.SizedSource = (*Cache)(nil)
	_ loader.Labeler     = (*Cache)(nil)
)

// entrySize is the entry table's cost per sample.
const entrySize = int64(unsafe.Sizeof(entry{}))
