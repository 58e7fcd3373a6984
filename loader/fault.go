package loader

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"unsafe"
)

// Memory faults. A source that serves samples from a memory-mapped file
// (cifar, tar, arrow) hands out views of the mapping; if the file shrinks
// while mapped (truncated, or rewritten in place), touching a page past its
// new end raises SIGBUS, which by default kills the process. Workers run
// with debug.SetPanicOnFault, which turns such a fault into a panic; the
// fill loop recovers it (one deferred recover per chunk, not per sample)
// and reports the sample as a *RecordError wrapping ErrFault, so the
// stream's error policy applies: FailOnError ends it naming the file,
// SkipOnError delivers a neighbour. Only faults inside a registered
// mapping are taken for file faults: any other fault is a bug, and still
// crashes the process with its stack.

// mapping is a registered read-only file mapping.
type mapping struct {
	start, end uintptr
	file       string
}

var (
	mappingsMu sync.RWMutex
	mappings   = map[uintptr]mapping{} // by start; searched only after a fault
)

// RegisterMapping declares data a read-only mapping of file, so that a
// worker that faults reading it reports ErrFault instead of crashing the
// process. Formats call it right after mapping a file, and
// UnregisterMapping right before unmapping it.
func RegisterMapping(data []byte, file string) {
	if len(data) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	mappingsMu.Lock()
	mappings[start] = mapping{start: start, end: start + uintptr(len(data)), file: file}
	mappingsMu.Unlock()
}

// UnregisterMapping forgets a mapping registered by RegisterMapping.
func UnregisterMapping(data []byte) {
	if len(data) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	mappingsMu.Lock()
	delete(mappings, start)
	mappingsMu.Unlock()
}

// mappedFault returns the fault a recovered panic value r describes, when
// it is a memory fault inside a registered mapping: the mapping and the
// faulting offset.
func mappedFault(r any) (m mapping, off uintptr, ok bool) {
	_, isRuntime := r.(runtime.Error)
	fa, hasAddr := r.(interface{ Addr() uintptr })
	if !isRuntime || !hasAddr {
		return mapping{}, 0, false
	}
	addr := fa.Addr()
	mappingsMu.RLock()
	defer mappingsMu.RUnlock()
	for _, m := range mappings {
		if addr >= m.start && addr < m.end {
			return m, addr - m.start, true
		}
	}
	return mapping{}, 0, false
}

// faultError is the error of sample i of src, whose read faulted at off
// in m. It names the sample as src does (see Namer), and says how the
// file changed: its size now against the mapping's.
func faultError(src Source, i int64, m mapping, off uintptr) error {
	file, record := src.String(), i
	if n, ok := As[Namer](src); ok {
		file, record = n.Name(i), -1
	}
	where := m.file // unless file names it already (SHARD(MEMBER) does)
	if strings.HasPrefix(file, m.file) {
		where = "the file"
	}
	now := "it is gone"
	if fi, err := os.Stat(m.file); err == nil {
		now = fmt.Sprintf("it has %d now", fi.Size())
	}
	return &RecordError{File: file, Record: record, Err: fmt.Errorf("%w: fault at byte %d of %s, mapped with %d bytes; %s",
		ErrFault, off, where, m.end-m.start, now)}
}

// guarded reads one sample with faults recovered: the slow path of a
// chunk in which a sample faulted. Sample copies a view of a mapping into
// scratch under the guard, so the kernel that reads the pixels next never
// touches the mapping.
type guarded struct{ Source }

func (g guarded) Sample(i int64, scratch []byte) (label int32, pix []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, off, ok := mappedFault(r)
			if !ok {
				panic(r)
			}
			label, pix, err = 0, nil, faultError(g.Source, i, m, off)
		}
	}()
	label, pix, err = g.Source.Sample(i, scratch)
	if err == nil && len(pix) > 0 && len(scratch) > 0 && unsafe.SliceData(pix) != unsafe.SliceData(scratch) {
		pix = scratch[:copy(scratch, pix)]
	}
	return label, pix, err
}

// guardOpen runs fn, a format's opener or Split, with faults recovered:
// indexing a file (a tar's headers, an Arrow footer, CIFAR's labels) reads
// its mapping too. What fn had mapped before the fault stays mapped; the
// process goes on.
func guardOpen(fn func() (Source, error)) (src Source, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			m, off, ok := mappedFault(r)
			if !ok {
				panic(r)
			}
			src, err = nil, &RecordError{File: m.file, Record: -1, Err: fmt.Errorf("%w: fault at byte %d while opening", ErrFault, off)}
		}
	}()
	return fn()
}
