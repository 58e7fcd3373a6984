package convert

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrExists refuses an output that exists and is not empty, without
// Options.Overwrite: converting 10,000 samples into a directory holding a
// 50,000-sample conversion would otherwise read back as 40,000 old and
// 10,000 new samples.
var ErrExists = errors.New("convert: the output exists and is not empty (use --overwrite to replace it)")

// checkOutput refuses out if it exists, is not empty, and may not be
// overwritten. It never follows a link: a link at out is not empty.
func checkOutput(out string, overwrite bool) error {
	if overwrite {
		return nil
	}
	empty, err := isEmpty(out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("convert: %w", err)
	}
	if err == nil && !empty {
		return fmt.Errorf("%w: %s", ErrExists, out)
	}
	return nil
}

// isEmpty reports whether path is an empty directory or an empty regular
// file. Anything else, a link included, is not empty.
func isEmpty(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return false, err
	}
	switch {
	case fi.Mode().IsRegular():
		return fi.Size() == 0, nil
	case !fi.IsDir():
		return false, nil
	}
	d, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer d.Close()
	if _, err := d.Readdirnames(1); err != io.EOF {
		return false, err
	}
	return true, nil
}

// newStage creates the staging directory of out: new, next to out (on the
// same file system, so that install is a rename), with a random name
// created exclusively, so that no file or link already there is written
// through, and locked until release is called (stale.go). A crash leaves
// it behind, named .NAME.tmp-NNN; the next conversion to out removes it
// first, along with any other stale stage of out's.
func newStage(out string) (stage string, release func(), err error) {
	parent := filepath.Dir(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", nil, fmt.Errorf("convert: %w", err)
	}
	prefix := "." + filepath.Base(out) + ".tmp-"
	removeStale(parent, prefix, true)
	for {
		stage, err := os.MkdirTemp(parent, prefix)
		if err != nil {
			return "", nil, fmt.Errorf("convert: %w", err)
		}
		d, err := os.Open(stage)
		if err == nil {
			err = holdTemp(d, stage)
			if errors.Is(err, errTempGone) {
				d.Close()
				continue // another run's removeStale took it before the lock: make another
			}
		}
		// MkdirTemp makes it 0700; a directory output keeps the mode it has.
		if err == nil {
			err = os.Chmod(stage, 0o755)
		}
		if err != nil {
			if d != nil {
				d.Close()
			}
			os.Remove(stage)
			return "", nil, fmt.Errorf("convert: %w", err)
		}
		return stage, func() { d.Close() }, nil
	}
}

// install moves the finished output src (in its staging directory) to
// dst. Where dst does not exist this is one rename that refuses to replace
// anything appearing meanwhile. An existing dst is replaced only if it is
// empty or overwrite is set: in one step where the system can exchange two
// names (Linux's RENAME_EXCHANGE), else by moving it aside first, so a
// reader sees the old output or the new one, or for an instant none, but
// never a mixture. The old output is then removed.
func install(src, dst string, overwrite bool) error {
	err := renameNoReplace(src, dst)
	if err == nil {
		syncDir(filepath.Dir(dst))
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return wrapInstall(err)
	}
	if err := checkOutput(dst, overwrite); err != nil {
		return err
	}
	if err := exchangeNames(src, dst); err == nil {
		syncDir(filepath.Dir(dst))
		return wrapInstall(os.RemoveAll(src)) // src is the old output now
	}
	aside, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".old-")
	if err != nil {
		return wrapInstall(err)
	}
	defer os.RemoveAll(aside)
	old := filepath.Join(aside, "old")
	if err := os.Rename(dst, old); err != nil {
		return wrapInstall(err)
	}
	if err := os.Rename(src, dst); err != nil {
		if rerr := os.Rename(old, dst); rerr != nil {
			return wrapInstall(fmt.Errorf("%w; the old output is left at %s: %w", err, old, rerr))
		}
		return wrapInstall(err)
	}
	syncDir(filepath.Dir(dst))
	return nil
}

// exchangeNames is exchange, which a test replaces to take the fallback.
var exchangeNames = exchange

func wrapInstall(err error) error {
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	return nil
}

// syncDir makes the renames in dir durable; failing that is not an error
// of the conversion.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// renameChecked renames src to dst unless dst exists: the fallback of
// renameNoReplace, with a window between the check and the rename.
func renameChecked(src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: fs.ErrExist}
	}
	return os.Rename(src, dst)
}
