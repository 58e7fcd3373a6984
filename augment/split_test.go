//go:build amd64 && !purego && unix

package augment

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// guarded returns an n-byte slice whose end is the end of a mapped page,
// followed by an inaccessible one: a load past its end faults. The
// assembly's last step may be a row's (and the buffer's) last bytes.
func guarded(tb testing.TB, n int) []byte {
	pg := unix.Getpagesize()
	size := (n + pg - 1) / pg * pg
	b, err := unix.Mmap(-1, 0, size+pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Munmap(b) })
	if err := unix.Mprotect(b[size:], unix.PROT_NONE); err != nil {
		tb.Fatal(err)
	}
	return b[size-n : size : size]
}

// splitKernel is a SIMD HWC → CHW kernel under test (splitRows32,
// splitRows8) and the table it is tested with.
type splitKernel[T uint8 | uint32] struct {
	run   func(d0, d1, d2 []T, s [][3]byte, lut *[3][256]T, g *geom)
	table func(r *rand.Rand) *[3][256]T
}

// TestSplitSIMDMatchesGo holds split4Fwd/split4Rev (through splitRows32,
// random tables) and split16 (through splitRows8, the identity tables of
// u8 output) to splitFwd/splitRev bit for bit: every row width 0..70 (all
// tails, and rows with no whole step of 4 or 16), 224 and odd widths, both
// flips, tight rows and rows with strides past n on both sides, each
// source ending at a guard page. Elements outside the rows must keep
// their sentinel.
func TestSplitSIMDMatchesGo(t *testing.T) {
	if !haveSplitSIMD {
		t.Skip("no SIMD split on this machine (amd64 with AVX)")
	}
	t.Run("f32", func(t *testing.T) {
		checkSplit(t, splitKernel[uint32]{splitRows32, func(r *rand.Rand) *[3][256]uint32 {
			var lut [3][256]uint32
			for ch := range lut {
				for i := range lut[ch] {
					lut[ch][i] = r.Uint32()
				}
			}
			return &lut
		}}, 0xdeadbeef)
	})
	t.Run("u8", func(t *testing.T) {
		checkSplit(t, splitKernel[uint8]{splitRows8, func(*rand.Rand) *[3][256]uint8 { return identity8() }}, 0xa5)
	})
}

func identity8() *[3][256]uint8 {
	var lut [3][256]uint8
	for ch := range lut {
		for i := range lut[ch] {
			lut[ch][i] = uint8(i)
		}
	}
	return &lut
}

func checkSplit[T uint8 | uint32](t *testing.T, k splitKernel[T], sentinel T) {
	type tc struct {
		n, rows int
		dw, dow int // source and output stride beyond n
		x0      int // source pixels before the first row's
	}
	var cases []tc
	for n := range 71 {
		cases = append(cases, tc{n, 3, 0, 0, 0}, tc{n, 2, 5, 3, 1}, tc{n, 1, 0, 0, 2})
	}
	for _, n := range []int{224, 223, 225, 97, 129, 255} {
		cases = append(cases, tc{n, 4, 0, 0, 0}, tc{n, 5, 31, 7, 3}, tc{n, 1, 0, 0, 0})
	}
	cases = append(cases, tc{224, 224, 0, 0, 0})
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range cases {
		for _, flip := range []bool{false, true} {
			g := geom{rows: c.rows, n: c.n, w: c.n + c.dw, ow: c.n + c.dow, flip: flip}
			lut := k.table(r)
			// The last row's last pixel is the buffer's last byte.
			src := guarded(t, 3*(c.x0+(c.rows-1)*g.w+c.n))
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			s := pixels(src)[c.x0:]
			plane := (c.rows-1)*g.ow + c.n
			var got, want [3][]T
			for ch := range 3 {
				got[ch], want[ch] = make([]T, plane), make([]T, plane)
				for i := range plane {
					got[ch][i], want[ch][i] = sentinel, sentinel
				}
			}
			k.run(got[0], got[1], got[2], s, lut, &g)
			if flip {
				splitRev(want[0], want[1], want[2], s, lut, &g)
			} else {
				splitFwd(want[0], want[1], want[2], s, lut, &g)
			}
			for ch := range 3 {
				for i := range plane {
					if got[ch][i] != want[ch][i] {
						t.Fatalf("%+v flip=%v: channel %d row %d pixel %d: got %#x, want %#x",
							c, flip, ch, i/g.ow, i%g.ow, got[ch][i], want[ch][i])
					}
				}
			}
		}
	}
}

// BenchmarkSplit is one 224×224 HWC → CHW image through the Go loops and
// the assembly: f32 (the ImageNet case) and u8 (what crosses hosts for
// normalize_on); bytes are the output's.
func BenchmarkSplit(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	benchSplit(b, "f32", splitKernel[uint32]{splitRows32, func(r *rand.Rand) *[3][256]uint32 {
		var lut [3][256]uint32
		for ch := range lut {
			for i := range lut[ch] {
				lut[ch][i] = r.Uint32()
			}
		}
		return &lut
	}}, r)
	benchSplit(b, "u8", splitKernel[uint8]{splitRows8, func(*rand.Rand) *[3][256]uint8 { return identity8() }}, r)
}

func benchSplit[T uint8 | uint32](b *testing.B, out string, k splitKernel[T], r *rand.Rand) {
	const n = 224
	src := make([]byte, 3*n*n)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	lut := k.table(r)
	d := make([]T, 3*n*n)
	d0, d1, d2, s := d[:n*n], d[n*n:2*n*n], d[2*n*n:], pixels(src)
	for _, impl := range []string{"go", "asm"} {
		for _, flip := range []bool{false, true} {
			b.Run(fmt.Sprintf("out=%s/impl=%s/flip=%v", out, impl, flip), func(b *testing.B) {
				if impl == "asm" && !haveSplitSIMD {
					b.Skip("no AVX")
				}
				g := geom{rows: n, n: n, w: n, ow: n, flip: flip}
				b.SetBytes(int64(len(d)) * int64(unsafe.Sizeof(d[0])))
				b.ReportAllocs()
				for b.Loop() {
					switch {
					case impl == "asm":
						k.run(d0, d1, d2, s, lut, &g)
					case flip:
						splitRev(d0, d1, d2, s, lut, &g)
					default:
						splitFwd(d0, d1, d2, s, lut, &g)
					}
				}
			})
		}
	}
}
