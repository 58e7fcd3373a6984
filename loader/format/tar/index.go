package tar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"

	"github.com/loaderd/loaderd/loader"
)

// tarMember is a regular file inside a tar archive: its data is
// size bytes at off.
type tarMember struct {
	name      string
	off, size int64
	small     []byte // the data of a member of at most smallMember bytes (a label), when indexTar was asked to keep it
}

// smallMember is the largest member whose data an index keeps: a
// WebDataset label (.cls), so a remote shard's labels need no read.
const smallMember = 64

// maxTarMembers bounds an index, so a hostile archive of empty headers
// cannot grow it without end (1<<26 members of 512-byte headers is a 32 GiB
// archive).
const maxTarMembers = 1 << 26

// indexTar lists the regular files of the tar archive in r (size bytes),
// reading headers only: archive/tar skips each member's data by seeking.
// A member whose header declares more data than the archive holds is a
// loader.ErrTruncated error naming it; one that declares less leaves the
// next header misplaced, which fails its checksum: a loader.ErrCorrupt
// error naming the member before it. The returned members lie within
// [0, size), in increasing, non-overlapping order. With keepSmall the
// data of members of at most smallMember bytes is read too.
func indexTar(r io.ReaderAt, size int64, keepSmall bool) ([]tarMember, error) {
	sr := io.NewSectionReader(r, 0, size)
	tr := tar.NewReader(sr)
	var out []tarMember
	prev := "(start of archive)"
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, trailing(sr, size, prev)
		}
		if err != nil {
			switch {
			case errors.Is(err, io.ErrUnexpectedEOF):
				return nil, fmt.Errorf("%w: after member %q: the archive ends inside a header or the data (its size may be wrong): %w", loader.ErrTruncated, prev, err)
			case errors.Is(err, tar.ErrHeader):
				return nil, fmt.Errorf("%w: the header after member %q is invalid (that member's size may be wrong): %w", loader.ErrCorrupt, prev, err)
			}
			return nil, fmt.Errorf("%w: after member %q: %w", loader.ErrCorrupt, prev, err)
		}
		pos, err := sr.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, err
		}
		if h.Size < 0 || h.Size > size-pos {
			return nil, fmt.Errorf("%w: member %q declares %d bytes at offset %d, but the archive has %d", loader.ErrTruncated, h.Name, h.Size, pos, size)
		}
		prev = h.Name
		switch h.Typeflag {
		case tar.TypeReg: // archive/tar reports the old '\x00' as TypeReg too
		case tar.TypeGNUSparse:
			return nil, fmt.Errorf("%w: member %q is a sparse file", loader.ErrCorrupt, h.Name)
		default:
			continue // directories, links, devices: no data of ours
		}
		if len(out) == maxTarMembers {
			return nil, fmt.Errorf("%w: over %d members", loader.ErrCorrupt, maxTarMembers)
		}
		m := tarMember{name: h.Name, off: pos, size: h.Size}
		if keepSmall && h.Size <= smallMember {
			// Read now, while a remote reader still holds the header's chunk.
			m.small = make([]byte, h.Size)
			if _, err := io.ReadFull(tr, m.small); err != nil {
				return nil, fmt.Errorf("%w: member %q: %w", loader.ErrTruncated, h.Name, err)
			}
		}
		out = append(out, m)
	}
}

// trailing checks that nothing but zeros follows the end-of-archive
// blocks. A member that overstates its size can make the reader land on a
// run of zeros inside the next member and take it for the end: then the
// members after it would be lost without a word. (Archives concatenated
// with cat(1), which tar reads only with --ignore-zeros, fail here too.)
func trailing(sr *io.SectionReader, size int64, prev string) error {
	pos, err := sr.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	var buf [32 << 10]byte
	for pos < size {
		n, err := sr.ReadAt(buf[:min(int64(len(buf)), size-pos)], pos)
		for i, b := range buf[:n] {
			if b != 0 {
				return fmt.Errorf("%w: data at offset %d after the end-of-archive marker (member %q may declare the wrong size)", loader.ErrCorrupt, pos+int64(i), prev)
			}
		}
		if err != nil && err != io.EOF {
			return err
		}
		if n == 0 {
			break
		}
		pos += int64(n)
	}
	return nil
}
