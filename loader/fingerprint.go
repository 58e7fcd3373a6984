package loader

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"runtime/debug"
	"strings"
)

// fingerprintMagic starts what Fingerprint hashes; a change to what it
// covers or how it encodes it is a new version (and a new "vN:" prefix).
const fingerprintMagic = "loaderd fingerprint v1"

// What a fingerprint covers per sample, hashed once so that a source
// that gains or loses a Namer or Labeler hashes differently.
const (
	fpNames = 1 << iota
	fpLabels
	fpDigest
)

// Fingerprint returns "v1:" and the hex SHA-256 of what src serves: its
// Len, Spec and Classes, each sample's name (Namer) and label (Labeler)
// where it has them, and its Digester's digest where it has one, each
// found with As, so through any stack of wrappers. Two sources with the
// same fingerprint give the same samples for the same index, as far as
// their digests see: a format that digests sizes and an index (tar,
// folder, Arrow, Parquet) does not see an image rewritten in place at the
// same size.
//
// Names are hashed without the directory prefix every name shares (the
// dataset's root, an s3:// bucket and prefix, a cache directory), so
// that two copies of a dataset in two places fingerprint the same. It
// reads no pixels: its cost is a few name and label lookups per sample
// and the Digester's (see Digester). A memory fault in a mapped file is
// an ErrFault error, not a crash.
func Fingerprint(src Source) (string, error) {
	h := sha256.New()
	if err := guardFault(func() error { return fingerprint(h, src) }); err != nil {
		return "", fmt.Errorf("loader: fingerprint %s: %w", src, err)
	}
	return "v1:" + hex.EncodeToString(h.Sum(nil)), nil
}

func fingerprint(h hash.Hash, src Source) error {
	DigestString(h, fingerprintMagic)
	n := src.Len()
	DigestInt(h, n)
	sp := src.Spec()
	for _, v := range []int{sp.H, sp.W, sp.C, int(sp.DType), int(sp.Layout)} {
		DigestInt(h, int64(v))
	}
	classes := src.Classes()
	DigestInt(h, int64(len(classes)))
	for _, c := range classes {
		DigestString(h, c)
	}
	namer, named := As[Namer](src)
	labeler, labeled := As[Labeler](src)
	dig, digests := As[Digester](src)
	var flags int64
	for _, f := range []struct {
		ok  bool
		bit int64
	}{{named, fpNames}, {labeled, fpLabels}, {digests, fpDigest}} {
		if f.ok {
			flags |= f.bit
		}
	}
	DigestInt(h, flags)
	var prefix int
	if named {
		prefix = sharedDir(namer, n)
	}
	for i := int64(0); i < n && (named || labeled); i++ {
		if named {
			DigestString(h, namer.Name(i)[prefix:])
		}
		if labeled {
			l, err := labeler.Label(i)
			if err != nil {
				return err
			}
			DigestInt(h, int64(l))
		}
	}
	if err := digestFields(h, src); err != nil {
		return err
	}
	if digests {
		return dig.Digest(h)
	}
	return nil
}

// sharedDir returns the length of the directory prefix, up to and with
// its last '/', that all n names share.
func sharedDir(namer Namer, n int64) int {
	if n == 0 {
		return 0
	}
	common := namer.Name(0)
	for i := int64(1); i < n && common != ""; i++ {
		name := namer.Name(i)
		k := 0
		for k < len(common) && k < len(name) && common[k] == name[k] {
			k++
		}
		common = common[:k]
	}
	return strings.LastIndexByte(common, '/') + 1
}

// guardFault runs fn with memory faults in registered mappings made
// ErrFault errors, as guardOpen does for an opener.
func guardFault(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			m, off, ok := mappedFault(r)
			if !ok {
				panic(r)
			}
			err = &RecordError{File: m.file, Record: -1, Err: fmt.Errorf("%w: fault at byte %d while digesting", ErrFault, off)}
		}
	}()
	return fn()
}

// DigestInt writes v into h as 8 bytes, big-endian: fixed width, so that
// a sequence of them is unambiguous.
func DigestInt(h hash.Hash, v int64) {
	var b [8]byte
	h.Write(binary.BigEndian.AppendUint64(b[:0], uint64(v)))
}

// DigestString writes s into h after its length (DigestInt), so that
// no two sequences of strings write the same bytes.
func DigestString(h hash.Hash, s string) {
	DigestInt(h, int64(len(s)))
	io.WriteString(h, s) // without a copy where h can take a string
}

// DigestBool writes v into h as DigestInt of 1 or 0.
func DigestBool(h hash.Hash, v bool) {
	var i int64
	if v {
		i = 1
	}
	DigestInt(h, i)
}
