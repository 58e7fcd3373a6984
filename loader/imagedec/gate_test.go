package imagedec

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"sync"
	"testing"

	"github.com/loaderd/loaderd/loader"
)

// recGate records what decodes ask of it; refuse makes it say no.
type recGate struct {
	mu       sync.Mutex
	held     int64
	acquired []int64
	refuse   error
}

func (g *recGate) Acquire(n int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refuse != nil {
		return g.refuse
	}
	g.held += n
	g.acquired = append(g.acquired, n)
	return nil
}

func (g *recGate) Release(n int64) {
	g.mu.Lock()
	g.held -= n
	g.mu.Unlock()
}

func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A decode of an image of 1 Mpx or more asks the memory gate for 4 bytes
// a pixel before it starts and gives them back when it ends, by Decode
// and by DecodeSized alike; a refusal fails the decode as too large, and
// small images never ask.
func TestMemoryGate(t *testing.T) {
	g := &recGate{}
	SetMemoryGate(g)
	defer SetMemoryGate(nil)
	big, small := pngOf(t, 1280, 1024), pngOf(t, 64, 48)
	d := &Decoder{H: 1024, W: 1280, MaxPixels: DefaultMaxPixels}
	if err := d.Decode(big, make([]byte, 1280*1024*3)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DecodeSized(big, make([]byte, 1280*1024*3), loader.Want{}); err != nil {
		t.Fatal(err)
	}
	ds := &Decoder{H: 48, W: 64}
	if err := ds.Decode(small, make([]byte, 64*48*3)); err != nil {
		t.Fatal(err)
	}
	want := int64(1280 * 1024 * 4)
	if len(g.acquired) != 2 || g.acquired[0] != want || g.acquired[1] != want || g.held != 0 {
		t.Fatalf("acquired %v (want two of %d), %d still held", g.acquired, want, g.held)
	}
	g.refuse = errors.New("over the daemon's memory limit")
	err := d.Decode(big, make([]byte, 1280*1024*3))
	if !errors.Is(err, ErrTooLarge) || !bytes.Contains([]byte(err.Error()), []byte("needs 5 MiB to decode: over the daemon's memory limit")) {
		t.Fatalf("a refused decode: %v", err)
	}
}
