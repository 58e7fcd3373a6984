package imagedec

import (
	"bytes"
	"errors"
	"testing"

	"github.com/loaderd/loaderd/loader/internal/loadertest"
)

// TestResize checks the filter against values worked out by hand from
// PIL's algorithm, and its invariants.
func TestResize(t *testing.T) {
	var r resizer
	// A 4×1 row shrunk to 2×1: weights 3/7, 3/7, 1/7 around each centre.
	src := []byte{0, 0, 0, 100, 100, 100, 200, 200, 200, 255, 255, 255}
	dst := make([]byte, 6)
	r.resize(dst, src, 1, 4, 1, 2)
	if !bytes.Equal(dst, []byte{71, 71, 71, 209, 209, 209}) {
		t.Fatalf("4→2: %v, want 71s and 209s", dst)
	}
	// A flat image stays flat, shrunk or grown, and so does each channel.
	flat := bytes.Repeat([]byte{10, 128, 250}, 7*5)
	for _, size := range [][2]int{{3, 2}, {13, 9}, {7, 1}} {
		out := make([]byte, size[0]*size[1]*3)
		r.resize(out, flat, 5, 7, size[1], size[0])
		if !bytes.Equal(out, bytes.Repeat([]byte{10, 128, 250}, size[0]*size[1])) {
			t.Fatalf("flat 7x5 → %dx%d: %v", size[0], size[1], out)
		}
	}
}

// TestDecodeResize: a declared resize stretches an image of another size;
// without it the same image is ErrSize. (The folder format's tests check
// resize=bilinear gives the same pixels.)
func TestDecodeResize(t *testing.T) {
	data := loadertest.Fixture(t, "img/rgb.png") // 8×6
	native := make([]byte, 8*6*3)
	if err := (&Decoder{H: 6, W: 8}).Decode(data, native); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 5*3*3)
	var r resizer
	r.resize(want, native, 6, 8, 3, 5)
	got := make([]byte, 5*3*3)
	d := &Decoder{H: 3, W: 5, Resize: true}
	if err := d.Decode(data, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("resized decode: %v, equal %v", err, bytes.Equal(got, want))
	}
	if err := (&Decoder{H: 3, W: 5}).Decode(data, got); !errors.Is(err, ErrSize) {
		t.Fatalf("without resize: %v, want ErrSize", err)
	}
}
