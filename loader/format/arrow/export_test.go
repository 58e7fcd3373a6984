package arrow

import (
	"unsafe"

	"github.com/loaderd/loaderd/loader"
)

// For the external tests, which write files with internal/convert (which
// imports this package for the metadata keys).

// Inside reports whether p lies within the mapping m.
func Inside(p, m []byte) bool {
	a, b := uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	return a >= b && a+uintptr(len(p)) <= b+uintptr(len(m))
}

// Batches returns the number of record batches an arrow source indexed.
func Batches(src loader.Source) int { return len(src.(*source).batches) }

// Mapping returns the mapping of an arrow source's file k.
func Mapping(src loader.Source, k int) []byte { return src.(*source).files[k].data }
