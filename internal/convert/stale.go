package convert

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Temporaries. A conversion stages its output in .NAME.tmp-NNN beside
// NAME, and `loaderd index` writes .SHARD.tar.idx.NNN before renaming it
// into place (NNN: the random digits os.MkdirTemp and os.CreateTemp add).
// A run killed before its rename leaves its temporary behind; the next
// run of the same kind for the same output removes it at start.
//
// What is "not in use" is decided by a lock, not by a guess: the run that
// makes a temporary takes an exclusive flock(2) on it at once and holds
// it until the temporary is renamed or removed, and the kernel drops the
// lock when the process dies, however it dies. A later run removes a
// temporary only if
//
//   - its name is its own kind's for this output: the prefix and digits,
//     nothing else;
//   - it is a directory (a stage) or a regular file (an index), not a link;
//   - it was last changed before this process started;
//   - and the lock is free: no live process holds it (a flock is seen by
//     every process of the machine, whatever its PID namespace, and a
//     reused PID does not fool it).
//
// The owner, once it has the lock, checks that its name is still its
// temporary (removeStale may have taken the name in the instant between
// its creation and the lock); if not, it makes another. Where flock is
// not available (not Unix), nothing is removed. The .NAME.old-NNN
// directory a replaced output is moved to is never removed here: a crash
// in the middle of install can leave the only copy of the old output in
// it.

// processStart is when this process started (near enough: when the
// package was initialized). A temporary changed since then may belong to
// a run that started after it and has not locked it yet.
var processStart = time.Now()

// errTempGone is a temporary removed by another run before its owner
// locked it.
var errTempGone = errors.New("convert: the temporary was removed before it was locked")

// removeStale removes the stale temporaries in dir named prefix followed
// by digits: directories when dirs is set, else regular files. It returns
// their paths; a temporary it cannot remove is left (it is not this run's
// error).
func removeStale(dir, prefix string, dirs bool) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || fi.IsDir() != dirs || !dirs && !fi.Mode().IsRegular() || !fi.ModTime().Before(processStart) {
			continue
		}
		f, ok := tryLock(p, dirs)
		if !ok {
			continue // in use, or not lockable here
		}
		if now, err := f.Stat(); err == nil && os.SameFile(fi, now) && os.RemoveAll(p) == nil {
			removed = append(removed, p)
		}
		f.Close()
	}
	return removed
}

// holdTemp locks the temporary f just made at path, for as long as f
// stays open, and checks that path still names it (errTempGone if not).
// A file system without flock is no error: there removeStale cannot
// lock, so it removes nothing.
func holdTemp(f *os.File, path string) error {
	lockWait(f)
	a, err := f.Stat()
	if err != nil {
		return err
	}
	b, err := os.Lstat(path)
	if err != nil || !os.SameFile(a, b) {
		return errTempGone
	}
	return nil
}
