package arrow

import (
	"encoding/binary"
	"hash"
	"path"
	"path/filepath"

	"github.com/loaderd/loaderd/loader"
)

// digestFiles writes each file's base name (the same for a copy
// anywhere), size and footer: the schema with its metadata (shape,
// layout, classes) and every record batch's offset and length. Pixels
// rewritten in place at the same offsets are not seen.
func (m *mapped) digestFiles(h hash.Hash) error {
	loader.DigestInt(h, int64(len(m.files)))
	for _, f := range m.files {
		if f.data == nil {
			return loader.ErrClosed
		}
		loader.DigestString(h, path.Base(filepath.ToSlash(f.path)))
		loader.DigestInt(h, int64(len(f.data)))
		h.Write(footer(f.data)) // verified at open: in bounds
	}
	return nil
}

// footer returns an Arrow IPC file's footer flatbuffer, nil when its
// length is out of bounds.
func footer(data []byte) []byte {
	const eof = 4 + 6 // footer size, "ARROW1"
	if len(data) < eof {
		return nil
	}
	size := int64(binary.LittleEndian.Uint32(data[len(data)-eof:]))
	if size > int64(len(data)-eof) {
		return nil
	}
	return data[int64(len(data)-eof)-size : len(data)-eof]
}

// Digest implements loader.Digester for raw pixels: the files
// (digestFiles).
func (a *source) Digest(h hash.Hash) error {
	loader.DigestString(h, "arrow")
	return a.digestFiles(h)
}

// DigestRecords implements imagedec.RecordDigester: the files
// (digestFiles), then each row's image size (-1 for a null one).
func (a *encSource) DigestRecords(h hash.Hash) error {
	loader.DigestString(h, "arrow-encoded")
	if err := a.digestFiles(h); err != nil {
		return err
	}
	for _, b := range a.batches {
		for j := range b.n {
			n := b.offs[j+1] - b.offs[j]
			if b.null != nil && b.null[j] {
				n = -1
			}
			loader.DigestInt(h, n)
		}
	}
	return nil
}

var _ loader.Digester = (*source)(nil)
