package convert

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/tar"
)

// IndexTars writes the sidecar index SHARD.tar.idx (see loader/format/tar)
// beside each tar shard that paths name: files, directories (their .tar
// files) or glob patterns. Upload the sidecars beside the shards, and an
// s3:// dataset opens with one small GET per shard instead of reading
// every header. Each sidecar is written under a temporary name and
// renamed into place, replacing an older one. It returns the files
// written, in order.
func IndexTars(paths []string) ([]string, error) {
	var shards []string
	for _, p := range paths {
		got, err := expandTars(p)
		if err != nil {
			return nil, err
		}
		shards = append(shards, got...)
	}
	var out []string
	for _, s := range shards {
		idx, err := indexTar(s)
		if err != nil {
			return out, err
		}
		out = append(out, idx)
	}
	return out, nil
}

func expandTars(p string) ([]string, error) {
	if strings.ContainsAny(p, "*?[") {
		m, err := filepath.Glob(p)
		if err == nil && len(m) == 0 {
			err = fmt.Errorf("%w: no file matches", fs.ErrNotExist)
		}
		if err != nil {
			return nil, fmt.Errorf("convert: index %s: %w", p, err)
		}
		sort.Strings(m)
		return m, nil
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("convert: index: %w", err)
	}
	if !fi.IsDir() {
		return []string{p}, nil
	}
	m, _ := filepath.Glob(filepath.Join(p, "*.tar"))
	if len(m) == 0 {
		return nil, fmt.Errorf("convert: index %s: %w: no .tar file in the directory", p, fs.ErrNotExist)
	}
	sort.Strings(m)
	return m, nil
}

// indexTar writes shard's sidecar and returns its name.
func indexTar(shard string) (string, error) {
	f, err := os.Open(shard)
	if err != nil {
		return "", fmt.Errorf("convert: index: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("convert: index: %w", err)
	}
	b, err := tar.Index(f, fi.Size())
	if err != nil {
		return "", &loader.RecordError{File: shard, Record: -1, Err: err}
	}
	out := shard + tar.SidecarSuffix
	tmp, err := createTemp(out)
	if err != nil {
		return "", fmt.Errorf("convert: index: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp's 0600 would keep the uploader out
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out) // before the close: renamed while locked
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("convert: index %s: %w", out, err)
	}
	return out, nil
}

// createTemp creates and locks (stale.go) the temporary .OUT.NNN that
// out is written to before its rename, after removing the stale ones an
// earlier run killed before its rename left.
func createTemp(out string) (*os.File, error) {
	dir, prefix := filepath.Dir(out), "."+filepath.Base(out)+"."
	removeStale(dir, prefix, false)
	for {
		tmp, err := os.CreateTemp(dir, prefix+"*")
		if err != nil {
			return nil, err
		}
		err = holdTemp(tmp, tmp.Name())
		if err == nil {
			return tmp, nil
		}
		tmp.Close()
		if !errors.Is(err, errTempGone) {
			os.Remove(tmp.Name())
			return nil, err
		}
	}
}
