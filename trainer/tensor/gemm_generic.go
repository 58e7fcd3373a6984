package tensor

// genericKernel is the portable micro-kernel: a 4×16 tile accumulated in a
// stack array, row by row, the streaming pattern the Go compiler handles
// best without SIMD.
var genericKernel = gemmKernel{name: "go4x16", mr: 4, nr: 16, fn: kern4x16}

func kern4x16(kc int, a, b, c []float32, ldc int, alpha, beta float32) {
	var acc [4][16]float32
	a, b = a[:kc*4], b[:kc*16]
	p := 0
	for ; p+1 < kc; p += 2 { // two k steps per pass halve the acc traffic
		b0 := (*[16]float32)(b[p*16 : p*16+16])
		b1 := (*[16]float32)(b[p*16+16 : p*16+32])
		ap := (*[8]float32)(a[p*4 : p*4+8])
		for i := range acc {
			a0, a1 := ap[i], ap[4+i]
			r := &acc[i]
			for j := range r {
				r[j] += a0*b0[j] + a1*b1[j]
			}
		}
	}
	if p < kc {
		bp := (*[16]float32)(b[p*16 : p*16+16])
		ap := (*[4]float32)(a[p*4 : p*4+4])
		for i := range acc {
			av := ap[i]
			r := &acc[i]
			for j := range r {
				r[j] += av * bp[j]
			}
		}
	}
	for i := range acc {
		row := (*[16]float32)(c[i*ldc : i*ldc+16])
		for j, v := range acc[i] {
			if beta == 0 {
				row[j] = alpha * v
			} else {
				row[j] = alpha*v + beta*row[j]
			}
		}
	}
}
