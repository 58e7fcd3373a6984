package tar

import (
	"archive/tar"
	"bytes"
	"image/jpeg"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o644)
			}
		}
		if err != nil {
			return err
		}
	}
}

// TestCIFARTarMatchesFolder: the tar source and the extracted folder give
// the same 50,000 samples, pixel for pixel and label for label, in the
// same order; 10 classes of 5,000; and the pixels are image/jpeg's (with
// decoder=go; imagedec's tests hold decoder=turbo to PIL's).
func TestCIFARTarMatchesFolder(t *testing.T) {
	path := loadertest.CIFARJPEGTar(t)
	ts, err := open(path + "?decoder=go")
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	dir := t.TempDir()
	if err := untar(path, dir); err != nil {
		t.Fatal(err)
	}
	fs, err := loader.Open("folder:" + filepath.Join(dir, "train") + "?decoder=go")
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()

	if ts.Len() != 50000 || fs.Len() != 50000 {
		t.Fatalf("tar has %d samples, folder %d; want 50000", ts.Len(), fs.Len())
	}
	if !slices.Equal(ts.Classes(), loadertest.CIFAR10Classes) || !slices.Equal(fs.Classes(), loadertest.CIFAR10Classes) {
		t.Fatalf("classes %v and %v, want %v", ts.Classes(), fs.Classes(), loadertest.CIFAR10Classes)
	}
	if ts.Spec() != fs.Spec() || ts.Spec().Bytes() != 32*32*3 {
		t.Fatalf("specs %v and %v", ts.Spec(), fs.Spec())
	}
	counts := make([]int, 10)
	for i := range ts.Len() {
		l, _ := ts.Label(i)
		counts[l]++
	}
	for c, n := range counts {
		if n != 5000 {
			t.Errorf("class %s has %d samples, want 5000", loadertest.CIFAR10Classes[c], n)
		}
	}

	// Two goroutines, as two workers would, each over half the indices.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range int64(2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b := make([]byte, 3072), make([]byte, 3072)
			for i := w; i < ts.Len(); i += 2 {
				la, pa, err := ts.Sample(i, a)
				if err != nil {
					errs <- err
					return
				}
				lb, pb, err := fs.Sample(i, b)
				if err != nil {
					errs <- err
					return
				}
				name := ts.Name(i)
				if la != lb || !bytes.Equal(pa, pb) || filepath.Base(name[:len(name)-1]) != filepath.Base(pathOf(fs, i)) {
					t.Errorf("sample %d: tar %s label %d, folder %s label %d, pixels equal: %v",
						i, name, la, pathOf(fs, i), lb, bytes.Equal(pa, pb))
					return
				}
				if i%97 == 0 { // a sample against image/jpeg through At()
					want := loadertest.ReferenceRGB(t, ts.data(i), jpeg.Decode)
					if !bytes.Equal(pa, want) {
						t.Errorf("sample %d (%s): pixels differ from image/jpeg's", i, name)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// BenchmarkTarSample reads the real CIFAR-10 JPEGs from the tar, in
// parallel (-cpu 1,2 shows the scaling).
func BenchmarkTarSample(b *testing.B) {
	ts, err := open(loadertest.CIFARJPEGTar(b))
	if err != nil {
		b.Fatal(err)
	}
	defer ts.Close()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		scratch := make([]byte, 3072)
		for pb.Next() {
			i := next.Add(1) % ts.Len()
			if _, _, err := ts.Sample(i, scratch); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}
