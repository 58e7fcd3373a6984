package tensor

import "sync/atomic"

// Blocking of the packed GEMM (Goto/BLIS style): a packed MC×KC block of A
// stays in L2, a KC×NR micro-panel of B in L1, and C is walked in MR×NR
// register tiles by the micro-kernel.
const (
	gemmMC = 96
	gemmKC = 256
	gemmNC = 1024
	// Below this many flops a GEMM runs on one goroutine: waking helpers
	// costs more than it saves.
	gemmParFlops = 1 << 21
)

// gemmKernel is a micro-kernel: C[mr×nr] = alpha·Apack·Bpack + beta·C over
// kc steps; with beta == 0 it must not read C.
type gemmKernel struct {
	name   string
	mr, nr int
	fn     func(kc int, a, b, c []float32, ldc int, alpha, beta float32)
}

type gemmArgs struct {
	ta, tb        bool
	m, n, k       int
	alpha, beta   float32
	a, b, c       []float32
	lda, ldb, ldc int
	nc, mt, nt    int
	next          int64
}

func need(rows, cols, ld int) int { return (rows-1)*ld + cols }

// Gemm computes C = alpha·op(A)·op(B) + beta·C (row-major).
func (d *CPU) Gemm(ta, tb Transpose, m, n, k int, alpha float32, a Buffer, lda int,
	b Buffer, ldb int, beta float32, c Buffer, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		d.fail(argErr("gemm", "negative size m=%d n=%d k=%d", m, n, k))
		return
	}
	av, bv, cv := d.fvAny("gemm", a), d.fvAny("gemm", b), d.fvAny("gemm", c)
	if av == nil || bv == nil || cv == nil {
		return
	}
	if m == 0 || n == 0 {
		return
	}
	ar, ac := m, k // stored shape of A
	if ta {
		ar, ac = k, m
	}
	br, bc := k, n
	if tb {
		br, bc = n, k
	}
	switch {
	case ldc < n || len(cv) < need(m, n, ldc):
		d.fail(argErr("gemm", "C: ldc %d, len %d for %d×%d", ldc, len(cv), m, n))
		return
	case k > 0 && (lda < ac || len(av) < need(ar, ac, lda)):
		d.fail(argErr("gemm", "A: lda %d, len %d for stored %d×%d", lda, len(av), ar, ac))
		return
	case k > 0 && (ldb < bc || len(bv) < need(br, bc, ldb)):
		d.fail(argErr("gemm", "B: ldb %d, len %d for stored %d×%d", ldb, len(bv), br, bc))
		return
	}
	if k == 0 || alpha == 0 {
		scaleC(cv, m, n, ldc, beta)
		return
	}
	g := &d.a.gemm
	*g = gemmArgs{ta: bool(ta), tb: bool(tb), m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: av, b: bv, c: cv, lda: lda, ldb: ldb, ldc: ldc}
	g.mt = (m + gemmMC - 1) / gemmMC
	nw := d.nw
	if f := 2 * m * n * k; f < gemmParFlops*nw {
		nw = max(1, f/gemmParFlops)
	}
	// Enough column tiles that every worker has about two tiles.
	g.nt = max((n+gemmNC-1)/gemmNC, (2*nw+g.mt-1)/g.mt)
	nr := d.gk.nr
	g.nc = ((n+g.nt-1)/g.nt + nr - 1) / nr * nr
	g.nt = (n + g.nc - 1) / g.nc
	nw = min(nw, g.mt*g.nt)
	d.par(nw, 1, d.fnGemm)
}

func scaleC(c []float32, m, n, ldc int, beta float32) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			if beta == 0 {
				row[j] = 0
			} else {
				row[j] *= beta
			}
		}
	}
}

// gemmRange is one worker: it takes C tiles from a shared counter.
func (d *CPU) gemmRange(w, _, _ int) {
	g := &d.a.gemm
	kr := d.gk
	apLen := gemmMC * gemmKC
	need := apLen + gemmKC*g.nc + kr.mr*kr.nr
	if len(d.ws[w]) < need {
		d.ws[w] = make([]float32, need)
	}
	ws := d.ws[w]
	ap, bp, tmp := ws[:apLen], ws[apLen:apLen+gemmKC*g.nc], ws[need-kr.mr*kr.nr:need]
	for {
		t := int(atomic.AddInt64(&g.next, 1) - 1)
		if t >= g.mt*g.nt {
			return
		}
		ic, jc := (t%g.mt)*gemmMC, (t/g.mt)*g.nc
		mc, nc := min(gemmMC, g.m-ic), min(g.nc, g.n-jc)
		for pc := 0; pc < g.k; pc += gemmKC {
			kc := min(gemmKC, g.k-pc)
			beta := g.beta
			if pc > 0 {
				beta = 1
			}
			packB(bp, g, pc, jc, kc, nc, kr.nr)
			packA(ap, g, ic, pc, mc, kc, kr.mr)
			for jr := 0; jr < nc; jr += kr.nr {
				nn := min(kr.nr, nc-jr)
				bs := bp[jr*kc : jr*kc+kc*kr.nr]
				for ir := 0; ir < mc; ir += kr.mr {
					mm := min(kr.mr, mc-ir)
					as := ap[ir*kc : ir*kc+kc*kr.mr]
					co := (ic+ir)*g.ldc + jc + jr
					if mm == kr.mr && nn == kr.nr {
						kr.fn(kc, as, bs, g.c[co:], g.ldc, g.alpha, beta)
						continue
					}
					kr.fn(kc, as, bs, tmp, kr.nr, 1, 0)
					for i := 0; i < mm; i++ {
						crow := g.c[co+i*g.ldc : co+i*g.ldc+nn]
						for j := range crow {
							v := g.alpha * tmp[i*kr.nr+j]
							if beta != 0 {
								v += beta * crow[j]
							}
							crow[j] = v
						}
					}
				}
			}
		}
	}
}

// packA copies op(A)[ic:ic+mc, pc:pc+kc] into mr-row strips, k-major within
// a strip, zero-padding the last strip.
func packA(ap []float32, g *gemmArgs, ic, pc, mc, kc, mr int) {
	for s := 0; s < mc; s += mr {
		dst := ap[s*kc : s*kc+kc*mr]
		rows := min(mr, mc-s)
		if rows < mr {
			clear(dst)
		}
		for i := 0; i < rows; i++ {
			r := ic + s + i
			if !g.ta {
				src := g.a[r*g.lda+pc : r*g.lda+pc+kc]
				for p, v := range src {
					dst[p*mr+i] = v
				}
			} else {
				for p := 0; p < kc; p++ {
					dst[p*mr+i] = g.a[(pc+p)*g.lda+r]
				}
			}
		}
	}
}

// packB copies op(B)[pc:pc+kc, jc:jc+nc] into nr-column strips.
func packB(bp []float32, g *gemmArgs, pc, jc, kc, nc, nr int) {
	for s := 0; s < nc; s += nr {
		dst := bp[s*kc : s*kc+kc*nr]
		cols := min(nr, nc-s)
		if cols < nr {
			clear(dst)
		}
		if !g.tb && cols == 16 && nr == 16 { // the AVX2 strip: 64-byte moves
			for p := 0; p < kc; p++ {
				o := (pc+p)*g.ldb + jc + s
				*(*[16]float32)(dst[p*16:]) = *(*[16]float32)(g.b[o:])
			}
			continue
		}
		if g.tb { // op(B) columns are rows of B: read them contiguously
			for j := 0; j < cols; j++ {
				o := (jc+s+j)*g.ldb + pc
				for p, v := range g.b[o : o+kc] {
					dst[p*nr+j] = v
				}
			}
			continue
		}
		for p := 0; p < kc; p++ {
			o := (pc+p)*g.ldb + jc + s
			copy(dst[p*nr:p*nr+cols], g.b[o:o+cols])
		}
	}
}
