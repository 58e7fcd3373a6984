package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loaderd/loaderd/loader"
)

// arrowLen opens an Arrow output and returns its samples and files.
func arrowLen(t *testing.T, out string) (int64, []string) {
	t.Helper()
	src, err := loader.Open("arrow:" + out)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	files, _ := filepath.Glob(filepath.Join(out, "*"))
	return src.Len(), files
}

// noStaging fails if a staging or moved-aside directory is left in dir.
func noStaging(t *testing.T, dir string) {
	t.Helper()
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// TestConvertExistingOutput: a conversion into an output that holds
// another is refused unless Overwrite, and then replaces it whole. Before,
// 200 samples converted over 500 in 100-sample shards read back as 500:
// the two new shards and three old ones.
func TestConvertExistingOutput(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if _, err := Run(ctx, Options{From: "synthetic:500", To: "arrow:" + out, Shard: 100}); err != nil {
		t.Fatal(err)
	}
	_, err := Run(ctx, Options{From: "synthetic:200", To: "arrow:" + out, Shard: 100})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("over an existing output: %v, want ErrExists", err)
	}
	if n, files := arrowLen(t, out); n != 500 || len(files) != 5 {
		t.Fatalf("the refused conversion changed the output: %d samples in %v", n, files)
	}
	// Replaced in one exchange of names, and where there is none, by
	// moving the old output aside.
	for _, fallback := range []bool{false, true} {
		n := int64(200)
		if fallback {
			exchangeNames = func(string, string) error { return errors.ErrUnsupported }
			t.Cleanup(func() { exchangeNames = exchange })
			n = 100
		}
		s, err := Run(ctx, Options{From: "synthetic:" + fmt.Sprint(n), To: "arrow:" + out, Shard: 100, Overwrite: true})
		if err != nil {
			t.Fatal(err)
		}
		got, files := arrowLen(t, out)
		if got != n || !slices.Equal(files, s.Files) || int64(len(files)) != n/100 {
			t.Fatalf("overwritten (fallback %v): %d samples in %v; want %d in %v", fallback, got, files, n, s.Files)
		}
		if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o755 {
			t.Fatalf("output directory %v (%v), want mode 0755 as a new directory has", fi.Mode(), err)
		}
		noStaging(t, dir)
	}

	// A conversion that fails leaves the old output as it was.
	bad := filepath.Join(dir, "bad")
	if err := os.MkdirAll(filepath.Join(bad, "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(bad, "c", "0.png"), []byte("not a PNG"), 0o644)
	if _, err := Run(ctx, Options{From: "folder:" + bad + "?size=32x32", To: "arrow:" + out, Overwrite: true}); err == nil {
		t.Fatal("converting an unreadable image succeeded")
	}
	if n, _ := arrowLen(t, out); n != 100 {
		t.Fatalf("a failed conversion changed the output: %d samples", n)
	}
	noStaging(t, dir)

	// One file: the same.
	file := filepath.Join(dir, "one.arrow")
	if _, err := Run(ctx, Options{From: "synthetic:50", To: "arrow:" + file}); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, Options{From: "synthetic:20", To: "arrow:" + file}); !errors.Is(err, ErrExists) {
		t.Fatalf("over an existing file: %v, want ErrExists", err)
	}
	if _, err := Run(ctx, Options{From: "synthetic:20", To: "arrow:" + file, Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if n, _ := arrowLen(t, file); n != 20 {
		t.Fatalf("overwritten file: %d samples, want 20", n)
	}
	noStaging(t, dir)
}

// TestConvertNeverFollowsLinks: links where the output or the old
// temporary names go are never written through. Before, a link at
// NAME.tmp was followed, and its target overwritten.
func TestConvertNeverFollowsLinks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	victimDir := filepath.Join(dir, "victim-dir")
	os.Mkdir(victimDir, 0o755)
	os.WriteFile(filepath.Join(victimDir, "keep"), []byte("precious"), 0o644)
	intact := func() {
		t.Helper()
		if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
			t.Fatalf("the link's target was written: %q, %v", b, err)
		}
		if ents, _ := os.ReadDir(victimDir); len(ents) != 1 {
			t.Fatalf("the linked directory was written: %v", ents)
		}
	}
	file := filepath.Join(dir, "x.arrow")
	os.Symlink(victim, file+".tmp")
	if _, err := Run(ctx, Options{From: "synthetic:10", To: "arrow:" + file}); err != nil {
		t.Fatal(err)
	}
	intact()
	// A link at the output is not empty: refused, then replaced itself.
	for _, link := range []struct{ out, target string }{{filepath.Join(dir, "y.arrow"), victim}, {filepath.Join(dir, "out"), victimDir}} {
		os.Symlink(link.target, link.out)
		if _, err := Run(ctx, Options{From: "synthetic:10", To: "arrow:" + link.out}); !errors.Is(err, ErrExists) {
			t.Fatalf("over a link: %v, want ErrExists", err)
		}
		if _, err := Run(ctx, Options{From: "synthetic:10", To: "arrow:" + link.out, Overwrite: true}); err != nil {
			t.Fatal(err)
		}
		intact()
		if fi, err := os.Lstat(link.out); err != nil || fi.Mode()&os.ModeSymlink != 0 {
			t.Fatalf("%s is still a link (%v)", link.out, err)
		}
		if n, _ := arrowLen(t, link.out); n != 10 {
			t.Fatalf("%s: %d samples, want 10", link.out, n)
		}
	}
}
