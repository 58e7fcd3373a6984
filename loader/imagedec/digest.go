package imagedec

import (
	"hash"

	"github.com/loaderd/loaderd/loader"
)

// RecordDigester is the optional side of Records that digests them for
// loader.Digester: what identifies the records' encoded bytes without
// reading them (file names relative to the dataset, sizes, offsets, a
// table's footer), never where the files are. Records without it are
// digested by their SizeOf.
type RecordDigester interface {
	DigestRecords(h hash.Hash) error
}

// Digest implements loader.Digester: the options that change the pixels
// decoded from the same bytes (resize=, the limits that refuse an image,
// the JPEG decoder, whose IDCTs differ; exact=, which forbids scaled
// IDCTs), then the records' digest.
func (s *Source) Digest(h hash.Hash) error {
	loader.DigestString(h, "imagedec")
	loader.DigestBool(h, s.opt.Resize)
	loader.DigestInt(h, s.pool.MaxPixels())
	loader.DigestInt(h, s.maxBytes)
	loader.DigestString(h, s.pool.Backend().String())
	if s.opt.Exact {
		// Only when set, so that every other dataset keeps its fingerprint.
		loader.DigestString(h, "exact=torchvision")
	}
	if rd, ok := s.recs.(RecordDigester); ok {
		return rd.DigestRecords(h)
	}
	for i := range s.recs.Len() {
		loader.DigestInt(h, s.recs.SizeOf(i))
	}
	return nil
}

var _ loader.Digester = (*Source)(nil)
