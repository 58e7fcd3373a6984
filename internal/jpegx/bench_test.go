package jpegx

import (
	"archive/tar"
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// cifarTar is the shared CIFAR-10 JPEG tar, relative to this package.
const cifarTar = "../../../shared/data/cifar10-train-jpg.tar"

// tarJPEGs reads up to n JPEGs of a tar, skipping the test without it.
func tarJPEGs(b *testing.B, path string, n int) [][]byte {
	f, err := os.Open(path)
	if err != nil {
		b.Skipf("skipped: %v", err)
	}
	defer f.Close()
	var out [][]byte
	tr := tar.NewReader(bufio.NewReader(f))
	for len(out) < n {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if strings.HasSuffix(h.Name, ".jpg") {
			data, err := io.ReadAll(tr)
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, data)
		}
	}
	return out
}

// BenchmarkDecodeCIFAR decodes 2,000 of the CIFAR-10 JPEGs (32×32,
// 4:2:0) in turn with one Decoder.
//
//	go test ./internal/jpegx -run XXX -bench DecodeCIFAR
func BenchmarkDecodeCIFAR(b *testing.B) {
	imgs := tarJPEGs(b, cifarTar, 2000)
	var d Decoder
	dst := make([]byte, 32*32*3)
	b.ReportAllocs()
	start := time.Now()
	i := 0
	for b.Loop() {
		if err := d.DecodeRGB(imgs[i%len(imgs)], dst); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "images/s")
}
