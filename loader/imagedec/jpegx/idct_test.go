package jpegx

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// idctGen fills a zeroed block.
type idctGen func(r *rand.Rand, blk *[64]int32)

// sym is uniform in [-m, m].
func sym(r *rand.Rand, m int32) int32 { return r.Int32N(2*m+1) - m }

// sparse sets 1..10 random coefficients to sym(m).
func sparse(m int32) idctGen {
	return func(r *rand.Rand, blk *[64]int32) {
		for range 1 + r.IntN(10) {
			blk[r.IntN(64)] = sym(r, m)
		}
	}
}

// dense sets all 64 coefficients to sym(m).
func dense(m int32) idctGen {
	return func(r *rand.Rand, blk *[64]int32) {
		for i := range blk {
			blk[i] = sym(r, m)
		}
	}
}

// realistic is an encoder's block: n coefficients among the first 40 in
// zig-zag order, shrinking with frequency, within ±m.
func realistic(r *rand.Rand, blk *[64]int32, n int, m int32) {
	for range n {
		k := r.IntN(40)
		blk[zz[k]] = sym(r, max(1, m*4/int32(4+k)))
	}
}

// wild is any int32, mostly on row 0 with zero AC (idctGo's shortcut,
// where the assembly hands large DCs back to idctGo).
func wild(r *rand.Rand, blk *[64]int32) {
	special := []int32{1 << 18, 1<<18 - 1, -1 << 18, -1<<18 - 1, 1 << 19, 1<<19 + 5,
		1 << 30, 1<<30 + 3, -1 << 30, math.MaxInt32, math.MinInt32, 4095, 4096, -4096}
	for range 1 + r.IntN(4) {
		v := int32(r.Uint32())
		if r.IntN(2) == 0 {
			v = special[r.IntN(len(special))]
		}
		if r.IntN(4) == 0 {
			blk[r.IntN(64)] = v
		} else {
			blk[r.IntN(8)] = v
		}
	}
}

var idctCases = []struct {
	name string
	gen  idctGen
	// Outcomes the case must produce: blocks written (w), blocks over
	// the workspace bound (b).
	want string
}{
	{"dc", func(r *rand.Rand, b *[64]int32) { b[0] = sym(r, 4200) }, "wb"},
	{"sparse-small", sparse(64), "w"},
	{"sparse-full", sparse(4095), "wb"},
	{"dense-small", dense(20), "w"},
	{"dense-300", dense(300), "w"},
	{"dense-full", dense(4095), "b"},
	{"realistic", func(r *rand.Rand, b *[64]int32) { realistic(r, b, 30, 300) }, "w"},
	// Only row 0: every column takes idctGo's zero-AC shortcut.
	{"row0", func(r *rand.Rand, b *[64]int32) {
		for c := range 8 {
			b[c] = sym(r, 4200)
		}
	}, "wb"},
	// Only column 0: workspace rows of zeros after the first lane.
	{"col0", func(r *rand.Rand, b *[64]int32) {
		for k := range 8 {
			b[8*k] = sym(r, 2000)
		}
	}, "wb"},
	// A DC near ±4095 and a small AC in its column: pass-1 values near
	// ±16383 by the full computation.
	{"bound", func(r *rand.Rand, b *[64]int32) {
		c := r.IntN(8)
		b[c] = sym(r, 4100)
		b[8*(1+r.IntN(7))+c] = sym(r, 2)
	}, "wb"},
	// Dense blocks at amplitudes from 1 to 4095, log-uniform.
	{"scaled", func(r *rand.Rand, b *[64]int32) {
		dense(int32(math.Exp(r.Float64()*math.Log(4095))))(r, b)
	}, "wb"},
	{"wild", wild, "wb"},
}

// TestIDCT holds idct (the assembly where the CPU has AVX2) to idctGo on
// 300,000 blocks: the same bool, and the same bytes everywhere in a
// buffer around the 8×8 area written at a random stride.
func TestIDCT(t *testing.T) {
	const perCase = 25000
	const pad = 16
	r := rand.New(rand.NewPCG(1, 2))
	fill := make([]byte, pad+7*64+8+pad)
	for i := range fill {
		fill[i] = byte(r.Uint32())
	}
	for _, tc := range idctCases {
		t.Run(tc.name, func(t *testing.T) {
			var ok, fails, handed int
			for i := range perCase {
				var blk [64]int32
				tc.gen(r, &blk)
				stride := 8 + r.IntN(57)
				n := pad + 7*stride + 8 + pad
				want, got := bytes.Clone(fill[:n]), bytes.Clone(fill[:n])
				in := blk
				wantOK := idctGo(want[pad:n-pad], stride, &in)
				gotOK := idct(got[pad:n-pad], stride, &in)
				if in != blk {
					t.Fatalf("block %d: idct changed its input", i)
				}
				if gotOK != wantOK || !bytes.Equal(got, want) {
					t.Fatalf("block %d %v stride %d: ok %v, want %v\ngot  %v\nwant %v",
						i, blk, stride, gotOK, wantOK, got, want)
				}
				if wantOK {
					ok++
				} else {
					fails++
				}
				if !useAVX2 {
					continue
				}
				// The assembly itself: it hands back only blocks a
				// decoder never has.
				asm := bytes.Clone(fill[:n])
				switch rc := idctAVX2(&asm[pad], stride, &in); {
				case rc < 0:
					if row0InRange(&blk) {
						t.Fatalf("block %d %v: assembly handed back a block it should do", i, blk)
					}
					handed++
				case (rc == 1) != wantOK || !bytes.Equal(asm, want):
					t.Fatalf("block %d %v stride %d: assembly %d, want %v\ngot  %v\nwant %v",
						i, blk, stride, rc, wantOK, asm, want)
				}
			}
			t.Logf("%d blocks: %d written, %d over the bound, %d handed to idctGo", perCase, ok, fails, handed)
			if strings.Contains(tc.want, "w") && ok == 0 || strings.Contains(tc.want, "b") && fails == 0 {
				t.Errorf("%d written, %d over the bound: the case misses an outcome", ok, fails)
			}
			if tc.name == "wild" && useAVX2 && handed == 0 {
				t.Errorf("no block handed to idctGo")
			}
		})
	}
}

// row0InRange says whether row 0 survives the full computation's <<13.
func row0InRange(blk *[64]int32) bool {
	for _, v := range blk[:8] {
		if v < -1<<18 || v >= 1<<18 {
			return false
		}
	}
	return true
}

// TestIDCTDispatch fails if an AVX2 machine silently runs the Go IDCT.
func TestIDCTDispatch(t *testing.T) {
	if !asmBuilt {
		t.Skip("skipped: no assembly IDCT in this build")
	}
	if !cpu.X86.HasAVX2 {
		t.Skip("skipped: no AVX2")
	}
	if !useAVX2 {
		t.Fatal("CPU has AVX2 but idct does not use it")
	}
	for _, tc := range []struct {
		n, stride int
		want      bool
	}{
		{64, 8, true},
		{7*40 + 8, 40, true},
		{1 << 20, 4096, true},
		{7*40 + 7, 40, false}, // one byte short: idctGo panics as it should
		{64, 7, false},        // overlapping rows
		{64, -8, false},
		{100, math.MaxInt / 2, false},
	} {
		if got := asmFits(tc.n, tc.stride); got != tc.want {
			t.Errorf("asmFits(%d, %d) = %v, want %v", tc.n, tc.stride, got, tc.want)
		}
	}
}

// BenchmarkIDCT times one realistic block (30 coefficients within ±300)
// per op.
//
//	go test ./loader/imagedec/jpegx -run XXX -bench IDCT
func BenchmarkIDCT(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	var blks [256][64]int32
	dst := make([]byte, 8*64)
	for i := range blks {
		for {
			blks[i] = [64]int32{}
			realistic(r, &blks[i], 30, 300)
			if idctGo(dst, 64, &blks[i]) {
				break
			}
		}
	}
	b.Run("go", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			idctGo(dst, 64, &blks[i&255])
		}
	})
	b.Run("asm", func(b *testing.B) {
		if !useAVX2 {
			b.Skip("skipped: no assembly IDCT")
		}
		for i := 0; b.Loop(); i++ {
			idct(dst, 64, &blks[i&255])
		}
	})
}
