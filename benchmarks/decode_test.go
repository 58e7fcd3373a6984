package benchmarks

import (
	"archive/tar"
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/imagedec"
)

// BenchmarkDecode measures JPEG decoding alone, per core and on 2 cores:
// decoder=turbo (PIL's pixels: loader/imagedec/jpegx for images up to
// 256×256, libjpeg-turbo for the rest), decoder=libjpeg (libjpeg-turbo
// for every image, the same pixels) and the Go decoder (image/jpeg), on
// the CIFAR-10 JPEGs (32×32) and on the large-image set (ImageNet-sized
// photographs, scripts/make-large-images.py), each image at its own size
// into a reused buffer. Then the whole CIFAR data path with each decoder.
//
//	go test ./benchmarks/ -run XXX -bench Decode -benchtime 3s
func BenchmarkDecode(b *testing.B) {
	for _, src := range []string{"tar-jpeg", "large-jpeg"} {
		for _, dec := range []string{"turbo", "libjpeg", "go"} {
			for _, workers := range []int{1, 2} {
				b.Run(fmt.Sprintf("src=%s/decoder=%s/workers=%d", src, dec, workers), func(b *testing.B) {
					benchDecode(b, src, dec, workers)
				})
			}
		}
	}
	for _, dec := range []string{"turbo", "go"} {
		b.Run("src=tar-jpeg/decoder="+dec+"/out=f32/workers=2", func(b *testing.B) {
			needJPEGTar(b)
			withCPU(b, func(b *testing.B) { benchPipeline(b, "tar:"+cifarJPEGTar+"?decoder="+dec, 2, sample.F32) })
		})
	}
}

var (
	tarImagesMu sync.Mutex
	tarImages   = map[string][][]byte{}
)

// encodedImages returns the encoded images of a benchmark source, read once.
func encodedImages(b *testing.B, src string) [][]byte {
	path := cifarJPEGTar
	if src == "large-jpeg" {
		path = largeImagesTar(b)
	} else {
		needJPEGTar(b)
	}
	tarImagesMu.Lock()
	defer tarImagesMu.Unlock()
	if imgs, ok := tarImages[path]; ok {
		return imgs
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var imgs [][]byte
	tr := tar.NewReader(bufio.NewReader(f))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && imagedec.IsImageName(h.Name) {
			data, err := io.ReadAll(tr)
			if err != nil {
				b.Fatal(err)
			}
			imgs = append(imgs, data)
		}
	}
	tarImages[path] = imgs
	return imgs
}

// benchDecode decodes src's images round-robin on workers goroutines,
// each with its own decoder and buffer, as the loader's workers do.
func benchDecode(b *testing.B, src, dec string, workers int) {
	name := dec
	if dec == "libjpeg" {
		name = "turbo"
	}
	backend, err := imagedec.ChooseBackend(name)
	if err != nil {
		b.Skip(err)
	}
	imgs := encodedImages(b, src)
	var next atomic.Int64
	var failed atomic.Value
	b.ReportAllocs()
	start := time.Now()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			d := imagedec.Decoder{Backend: backend, LibjpegOnly: dec == "libjpeg", MaxPixels: imagedec.AnySizeMaxPixels}
			// As a size=any worker decodes: the header's size checked,
			// the image decoded at it (DecodeConfig first would cost the
			// Go decoder a second decoder state per image).
			buf := make([]byte, 3*imagedec.AnySizeMaxPixels)
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				_, err := d.DecodeSized(imgs[i%int64(len(imgs))], buf, loader.Want{})
				if err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "images/s")
}

// largeImagesTar is loader/internal/loadertest.LargeImagesTar for this
// package: the same script, the same cached file.
func largeImagesTar(b *testing.B) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	p := filepath.Join(dir, "loaderd", "large-images-v1.tar")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("/usr/bin/python3", "../scripts/make-large-images.py", p).CombinedOutput(); err != nil {
		b.Skipf("skipped: scripts/make-large-images.py: %v: %s", err, out)
	}
	return p
}
