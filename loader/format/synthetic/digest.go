package synthetic

import (
	"hash"

	"github.com/loaderd/loaderd/loader"
)

// digestVersion names the generator: a change to the templates or to how
// a sample is drawn from them must change it, since N and the seed then
// no longer say which pixels a sample has.
const digestVersion = "synthetic 1"

// Digest implements loader.Digester: the generator, N and the seed,
// which are all a sample depends on.
func (s *source) Digest(h hash.Hash) error {
	loader.DigestString(h, digestVersion)
	loader.DigestInt(h, s.n)
	loader.DigestInt(h, int64(s.seed))
	return nil
}

var _ loader.Digester = (*source)(nil)
