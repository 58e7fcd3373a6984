package tar

import (
	"hash"
	"path"
	"path/filepath"

	"github.com/loaderd/loaderd/loader"
)

// DigestRecords implements imagedec.RecordDigester from the index alone:
// each shard's base name (a local file, an s3:// object or its cache copy
// are the same shard) and size, then each sample's shard, member name,
// offset and size. An image rewritten in place at the same size is not
// seen: the index holds no checksum of a member's bytes.
func (t *source) DigestRecords(h hash.Hash) error {
	loader.DigestString(h, "tar")
	loader.DigestInt(h, int64(len(t.shards)))
	for k := range t.shards {
		loader.DigestString(h, path.Base(filepath.ToSlash(t.shards[k].path)))
		loader.DigestInt(h, t.shards[k].size)
	}
	loader.DigestInt(h, int64(len(t.samples)))
	for i := range t.samples {
		s := &t.samples[i]
		loader.DigestInt(h, int64(s.shard))
		loader.DigestString(h, s.name)
		loader.DigestInt(h, s.off)
		loader.DigestInt(h, s.size)
	}
	return nil
}
