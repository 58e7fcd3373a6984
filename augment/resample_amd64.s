//go:build amd64 && !purego

#include "textflag.h"

// The resampler's inner loops in AVX2 (resample_amd64.go). Each lane is an
// int32 sum of u8 × int32 weight products, as Pillow's; VPMULLD/VPADDD
// give the same integers as its scalar code (no sum reaches 2^31), and
// VPSRAD $22 then the saturating packs are its clip8.

// [half, half, half, 0, 0, 0, 0, 0]: the rounding offset, added once to
// the pixel's three channel sums.
DATA hinit<>+0(SB)/4, $0x200000
DATA hinit<>+4(SB)/4, $0x200000
DATA hinit<>+8(SB)/4, $0x200000
DATA hinit<>+12(SB)/4, $0
DATA hinit<>+16(SB)/8, $0
DATA hinit<>+24(SB)/8, $0
GLOBL hinit<>(SB), RODATA|NOPTR, $32

// Lanes 3..5 (the odd tap's channels) moved to 0..2.
DATA hperm<>+0(SB)/4, $3
DATA hperm<>+4(SB)/4, $4
DATA hperm<>+8(SB)/4, $5
DATA hperm<>+12(SB)/4, $6
DATA hperm<>+16(SB)/8, $0
DATA hperm<>+24(SB)/8, $0
GLOBL hperm<>(SB), RODATA|NOPTR, $32

// After VPACKSSDW/VPACKUSWB of four accumulators, dword i holds columns
// of accumulator (i mod 4), half (i div 4): back to column order.
DATA vperm<>+0(SB)/4, $0
DATA vperm<>+4(SB)/4, $4
DATA vperm<>+8(SB)/4, $1
DATA vperm<>+12(SB)/4, $5
DATA vperm<>+16(SB)/4, $2
DATA vperm<>+20(SB)/4, $6
DATA vperm<>+24(SB)/4, $3
DATA vperm<>+28(SB)/4, $7
GLOBL vperm<>(SB), RODATA|NOPTR, $32

// func hpass3AVX2(dst, src *byte, nx int, start *int32, pairs int, w *int32)
// One RGB row: output pixel x sums pairs tap pairs; pair j is 8 bytes
// from src[3·(start[x]+2j)] (two pixels and two spare bytes) times the 8
// weights w[(x·pairs+j)·8:] = (k, k, k, k', k', k', 0, 0). The same count
// for every pixel (zero weights pad the shorter ones) keeps the loop's
// branch predictable. Writes 4 bytes per pixel (the fourth is the next
// pixel's, written after it).
TEXT ·hpass3AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nx+16(FP), CX
	MOVQ start+24(FP), R8
	MOVQ pairs+32(FP), R9
	MOVQ w+40(FP), BX
	VMOVDQU hinit<>(SB), Y8
	VMOVDQU hperm<>(SB), Y9
	TESTQ CX, CX
	JZ   hdone
	TESTQ R9, R9
	JZ   hdone

hx:
	MOVLQSX (R8), AX
	LEAQ (AX)(AX*2), AX
	ADDQ SI, AX
	MOVQ R9, DX
	VMOVDQA Y8, Y0

htap:
	VPMOVZXBD (AX), Y1
	VPMULLD (BX), Y1, Y1
	VPADDD Y1, Y0, Y0
	ADDQ $6, AX
	ADDQ $32, BX
	DECQ DX
	JNZ  htap

	VPERMD Y0, Y9, Y1
	VPADDD Y1, Y0, Y0
	VPSRAD $22, Y0, Y0
	VPACKSSDW X0, X0, X0
	VPACKUSWB X0, X0, X0
	VMOVD X0, (DI)
	ADDQ $3, DI
	ADDQ $4, R8
	DECQ CX
	JNZ  hx

hdone:
	VZEROUPPER
	RET

// func hpass3x2AVX2(dst, src *byte, dstride, sstride, nx int, start *int32, pairs int, w *int32)
// hpass3AVX2 over two rows at once (src and src+sstride into dst and
// dst+dstride): each weight vector is loaded once for both, and the two
// pixels share the rounding and packing steps. nx ≥ 1.
TEXT ·hpass3x2AVX2(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ dstride+16(FP), R12
	MOVQ sstride+24(FP), R13
	MOVQ nx+32(FP), CX
	MOVQ start+40(FP), R8
	MOVQ pairs+48(FP), R9
	MOVQ w+56(FP), BX
	VMOVDQU hinit<>(SB), Y8
	VMOVDQU hperm<>(SB), Y9
	TESTQ CX, CX
	JZ   h2done
	TESTQ R9, R9
	JZ   h2done

h2x:
	MOVLQSX (R8), AX
	LEAQ (AX)(AX*2), AX
	ADDQ SI, AX
	MOVQ R9, DX
	VMOVDQA Y8, Y0
	VMOVDQA Y8, Y3

h2tap:
	VMOVDQU (BX), Y10
	VPMOVZXBD (AX), Y1
	VPMOVZXBD (AX)(R13*1), Y2
	VPMULLD Y10, Y1, Y1
	VPMULLD Y10, Y2, Y2
	VPADDD Y1, Y0, Y0
	VPADDD Y2, Y3, Y3
	ADDQ $6, AX
	ADDQ $32, BX
	DECQ DX
	JNZ  h2tap

	VPERMD Y0, Y9, Y1
	VPERMD Y3, Y9, Y2
	VPADDD Y1, Y0, Y0
	VPADDD Y2, Y3, Y3
	VPSRAD $22, Y0, Y0
	VPSRAD $22, Y3, Y3
	VPACKSSDW X3, X0, X0
	VPACKUSWB X0, X0, X0
	VPEXTRD $1, X0, (DI)(R12*1)
	CMPQ CX, $1
	JEQ  h2last
	VMOVD X0, (DI)
	ADDQ $3, DI
	ADDQ $4, R8
	DECQ CX
	JMP  h2x

h2last:
	// The first row's last pixel: three bytes, since the fourth is the
	// second row's first, written already.
	VPEXTRW $0, X0, (DI)
	VPEXTRB $2, X0, 2(DI)

h2done:
	VZEROUPPER
	RET

// func vpassAVX2(dst, src *byte, stride, n int, k *int32, ntaps int)
// One output row of the vertical pass over n bytes (n a multiple of 32):
// dst[i] = clip8(half + Σt k[t]·src[t·stride+i]).
TEXT ·vpassAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), R8
	MOVQ n+24(FP), CX
	MOVQ k+32(FP), R9
	MOVQ ntaps+40(FP), R10
	MOVL $0x200000, AX
	VMOVD AX, X8
	VPBROADCASTD X8, Y8
	VMOVDQU vperm<>(SB), Y9
	SHRQ $5, CX
	JZ   vdone

vblock:
	VMOVDQA Y8, Y0
	VMOVDQA Y8, Y1
	VMOVDQA Y8, Y2
	VMOVDQA Y8, Y3
	MOVQ SI, AX
	MOVQ R9, BX
	MOVQ R10, DX
	TESTQ DX, DX
	JZ   vfin

vtap:
	VPBROADCASTD (BX), Y10
	VPMOVZXBD 0(AX), Y4
	VPMOVZXBD 8(AX), Y5
	VPMOVZXBD 16(AX), Y6
	VPMOVZXBD 24(AX), Y7
	VPMULLD Y10, Y4, Y4
	VPMULLD Y10, Y5, Y5
	VPMULLD Y10, Y6, Y6
	VPMULLD Y10, Y7, Y7
	VPADDD Y4, Y0, Y0
	VPADDD Y5, Y1, Y1
	VPADDD Y6, Y2, Y2
	VPADDD Y7, Y3, Y3
	ADDQ R8, AX
	ADDQ $4, BX
	DECQ DX
	JNZ  vtap

vfin:
	VPSRAD $22, Y0, Y0
	VPSRAD $22, Y1, Y1
	VPSRAD $22, Y2, Y2
	VPSRAD $22, Y3, Y3
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKUSWB Y2, Y0, Y0
	VPERMD Y0, Y9, Y0
	VMOVDQU Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  vblock

vdone:
	VZEROUPPER
	RET
