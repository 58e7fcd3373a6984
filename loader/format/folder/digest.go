package folder

import (
	"hash"
	"os"
	"path/filepath"

	"golang.org/x/sync/errgroup"

	"github.com/loaderd/loaderd/loader"
)

// statWorkers stat a folder's files at once: on a network file system a
// stat is a round trip, and a million of them one after another take
// minutes.
const statWorkers = 16

// DigestRecords implements imagedec.RecordDigester: each image's path
// relative to the root, '/'-separated, and its size, one stat per file.
// Not the modification times, which two copies of a folder never share;
// an image rewritten in place at the same size is not seen.
func (f *source) DigestRecords(h hash.Hash) error {
	sizes := make([]int64, len(f.files))
	var g errgroup.Group
	g.SetLimit(statWorkers)
	chunk := (len(f.files) + statWorkers - 1) / statWorkers
	for lo := 0; lo < len(f.files); lo += chunk {
		hi := min(lo+chunk, len(f.files))
		g.Go(func() error {
			for i := lo; i < hi; i++ {
				fi, err := os.Stat(f.Path(int64(i)))
				if err != nil {
					return &loader.RecordError{File: f.Path(int64(i)), Record: -1, Err: err}
				}
				sizes[i] = fi.Size()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	loader.DigestString(h, "folder")
	loader.DigestInt(h, int64(len(f.files)))
	for i, rel := range f.files {
		loader.DigestString(h, filepath.ToSlash(rel))
		loader.DigestInt(h, sizes[i])
	}
	return nil
}
