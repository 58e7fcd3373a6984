package loader

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/loaderd/loaderd/augment"
)

// Source turns a dataset index into a label and the pixels of one image.
//
// Sample must be safe for concurrent use by many workers. scratch is a
// buffer of at least Spec().Bytes() bytes owned by the calling worker: a
// source that has the pixels in memory already (a mapped CIFAR file)
// returns a view of them and ignores scratch; one that must produce them
// (a decoder, the synthetic source) writes them into scratch and returns it.
// The returned pixels are valid until the worker's next call.
type Source interface {
	// Len returns the number of samples.
	Len() int64
	// Spec describes every sample's pixels: U8, with the source's own layout.
	Spec() augment.Spec
	// Classes returns the class names; a label indexes into it.
	Classes() []string
	// Sample returns the label and pixels of sample i.
	Sample(i int64, scratch []byte) (label int32, pix []byte, err error)
	// String names the source, as FORMAT:PATH.
	String() string
	// Close releases the source's files and mappings.
	Close() error
}

// Opener opens a source from the PATH part of FORMAT:PATH.
type Opener func(path string) (Source, error)

var (
	formatsMu sync.RWMutex
	formats   = map[string]Opener{}
)

// RegisterFormat makes FORMAT:PATH openable by Open. It is meant to be
// called from init functions; registering a format twice panics.
func RegisterFormat(name string, open Opener) {
	formatsMu.Lock()
	defer formatsMu.Unlock()
	if _, dup := formats[name]; dup {
		panic("loader: format registered twice: " + name)
	}
	formats[name] = open
}

// Formats returns the registered format names, sorted.
func Formats() []string {
	formatsMu.RLock()
	defer formatsMu.RUnlock()
	names := make([]string, 0, len(formats))
	for n := range formats {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open opens a source named as FORMAT:PATH, e.g. "cifar:data/cifar-10-batches-bin"
// or "synthetic:50000". A bare FORMAT (such as "synthetic") passes an empty path.
func Open(spec string) (Source, error) {
	format, path, _ := strings.Cut(spec, ":")
	formatsMu.RLock()
	open, ok := formats[format]
	formatsMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("loader: %q: %w %q (known: %s)", spec, ErrUnknownFormat, format, strings.Join(Formats(), ", "))
	}
	return open(path)
}
