//go:build linux

package folder

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// writeImages writes class directory c of dir with the named files,
// each the fixture image of the same extension.
func writeImages(t *testing.T, dir string, names ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, "c", n), loadertest.Fixture(t, "img/rgb"+filepath.Ext(n)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sampleWithin reads sample i, failing the test if the read blocks: a
// FIFO opened for reading waits for a writer that never comes.
func sampleWithin(t *testing.T, src loader.Source, i int64) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, _, err := src.Sample(i, make([]byte, src.Spec().Bytes()))
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("Sample(%d) is blocked", i)
		return nil
	}
}

// TestFolderSpecialFiles: only regular files are read. A FIFO in the tree
// fails the open, naming it; links to a device or a FIFO, and a file
// replaced by a FIFO after the open, fail their samples, naming them,
// without blocking the worker.
func TestFolderSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	writeImages(t, dir, "0.png")
	if err := syscall.Mkfifo(filepath.Join(dir, "c", "1.png"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := open(dir)
	loadertest.WantRecordError(t, err, loader.ErrNotRegular, "c/1.png")

	dir = t.TempDir()
	writeImages(t, dir, "0.png", "3.png")
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"1.png": "/dev/null", "2.png": fifo} {
		if err := os.Symlink(target, filepath.Join(dir, "c", name)); err != nil {
			t.Fatal(err)
		}
	}
	src, err := open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != 4 {
		t.Fatalf("%d samples, want 4", src.Len())
	}
	loadertest.WantRecordError(t, sampleWithin(t, src, 1), loader.ErrNotRegular, "c/1.png")
	loadertest.WantRecordError(t, sampleWithin(t, src, 2), loader.ErrNotRegular, "c/2.png")
	p := filepath.Join(dir, "c", "3.png")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	loadertest.WantRecordError(t, sampleWithin(t, src, 3), loader.ErrNotRegular, "c/3.png")
	if err := sampleWithin(t, src, 0); err != nil {
		t.Fatalf("the regular file: %v", err)
	}
}

// TestFolderMaxBytes: a file over maxbytes= is refused before it is read,
// naming it; the default lets an ordinary image through.
func TestFolderMaxBytes(t *testing.T) {
	dir := t.TempDir()
	writeImages(t, dir, "0.png", "1.jpg") // 88 and 645 bytes
	src, err := loader.Open("folder:" + dir + "?maxbytes=100")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := sampleWithin(t, src, 0); err != nil {
		t.Fatal(err)
	}
	loadertest.WantRecordError(t, sampleWithin(t, src, 1), imagedec.ErrTooLarge, "c/1.jpg")
	// The first image gives the size: refused there, the open fails.
	_, err = loader.Open("folder:" + dir + "?maxbytes=50")
	loadertest.WantRecordError(t, err, imagedec.ErrTooLarge, "c/0.png")
	src, err = loader.Open("folder:" + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := sampleWithin(t, src, 1); err != nil {
		t.Fatal(err)
	}
	loadertest.CheckOpenErrors(t, map[string]string{
		"folder:" + dir + "?maxbytes=0":  "maxbytes=0: want a positive number of bytes",
		"folder:" + dir + "?maxbytes=1k": "maxbytes=1k",
	})
}
