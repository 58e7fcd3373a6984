package imagedec

import (
	"archive/tar"
	"bufio"
	"io"
	"os"
	"testing"
)

// eachTarImage calls f with the name and bytes of each image member of
// the tar at path, in order, until f returns false.
func eachTarImage(t testing.TB, path string, f func(name string, data []byte) bool) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	tr := tar.NewReader(bufio.NewReaderSize(file, 1<<20))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || !IsImageName(h.Name) {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !f(h.Name, data) {
			return
		}
	}
}
