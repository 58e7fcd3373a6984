package convert

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/tar"
)

// TestIndexTars: a sidecar beside every shard a directory or glob names,
// holding tar.Index of the shard, world-readable, replaced on a rerun;
// a missing path or a broken shard is an error naming it.
func TestIndexTars(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../loader/testdata/formats/bad/ext.tar")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.tar", "b.tar"} {
		os.WriteFile(filepath.Join(dir, n), src, 0o644)
	}
	for _, args := range [][]string{{dir}, {filepath.Join(dir, "*.tar")}} {
		got, err := IndexTars(args)
		want := []string{filepath.Join(dir, "a.tar.idx"), filepath.Join(dir, "b.tar.idx")}
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%v: %v, %v", args, got, err)
		}
		for _, p := range got {
			b, _ := os.ReadFile(p)
			idx, _ := tar.Index(bytes.NewReader(src), int64(len(src)))
			fi, _ := os.Stat(p)
			if !bytes.Equal(b, idx) || fi.Mode().Perm() != 0o644 || !strings.Contains(string(b), `"train/a/notes.txt"`) {
				t.Fatalf("%s: %d bytes, mode %v:\n%s", p, len(b), fi.Mode(), b)
			}
		}
	}
	if _, err := IndexTars([]string{filepath.Join(dir, "none.tar")}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing shard: %v", err)
	}
	lying, _ := os.ReadFile("../../loader/testdata/formats/bad/lying-big.tar") // a member declares more than the archive holds
	bad := filepath.Join(dir, "bad.tar")
	os.WriteFile(bad, lying, 0o644)
	var re *loader.RecordError
	if _, err := IndexTars([]string{bad}); !errors.As(err, &re) || re.File != bad {
		t.Fatalf("truncated shard: %v, want a RecordError naming it", err)
	}
	if _, err := os.Stat(bad + ".idx"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a sidecar was written for a broken shard")
	}
}
