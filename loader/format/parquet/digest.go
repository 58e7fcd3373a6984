package parquet

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"path"
	"path/filepath"

	"github.com/loaderd/loaderd/loader"
)

// fileDigest is what DigestRecords keeps of a file read at open, whose
// mapping is gone after it.
type fileDigest struct {
	name   string // base name: the same for a copy anywhere
	size   int64
	footer [sha256.Size]byte // SHA-256 of the footer's FileMetaData: schema, row groups and their offsets
}

// digestFile describes the parquet file in data, read without error.
func digestFile(name string, data []byte) fileDigest {
	d := fileDigest{name: path.Base(filepath.ToSlash(name)), size: int64(len(data))}
	if n := len(data); n >= 12 {
		meta := int64(binary.LittleEndian.Uint32(data[n-8:]))
		if meta <= int64(n-12) {
			d.footer = sha256.Sum256(data[int64(n-8)-meta : n-8])
		}
	}
	return d
}

// DigestRecords implements imagedec.RecordDigester: each file's name,
// size and footer, then each row's image size (-1 for a null one).
func (p *source) DigestRecords(h hash.Hash) error {
	if p.img.offs == nil {
		return loader.ErrClosed
	}
	loader.DigestString(h, "parquet")
	loader.DigestInt(h, int64(len(p.fileDigests)))
	for _, d := range p.fileDigests {
		loader.DigestString(h, d.name)
		loader.DigestInt(h, d.size)
		h.Write(d.footer[:])
	}
	for i := range p.Len() {
		n := p.img.offs[i+1] - p.img.offs[i]
		if p.img.null != nil && p.img.null[i] {
			n = -1
		}
		loader.DigestInt(h, n)
	}
	return nil
}
