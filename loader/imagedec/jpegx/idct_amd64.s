//go:build amd64 && !purego

#include "textflag.h"

// idctGo (idct.go) in AVX2. Each YMM register holds one row of 8 int32
// lanes, so a pass is the scalar code lane by lane with VPMULLD/VPADDD,
// which wrap as Go's int32 does. Pass 1 runs over the block's rows as
// loaded (lanes = columns); the workspace is transposed and pass 2 runs
// the same code (lanes = rows). idctGo's shortcuts for zero columns and
// rows give the full computation's numbers, except a zero-AC column whose
// DC is outside ±2^18, where the full version's <<13 wraps: for those the
// function returns -1 and the caller runs idctGo (the decoder's
// coefficients stay within ±4095).

// C8 is an int32 constant in all 8 lanes.
#define C8(name, v) \
	DATA name<>+0(SB)/4, $v; \
	DATA name<>+4(SB)/4, $v; \
	DATA name<>+8(SB)/4, $v; \
	DATA name<>+12(SB)/4, $v; \
	DATA name<>+16(SB)/4, $v; \
	DATA name<>+20(SB)/4, $v; \
	DATA name<>+24(SB)/4, $v; \
	DATA name<>+28(SB)/4, $v; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

C8(c0298, 2446)
C8(n0390, -3196)
C8(c0541, 4433)
C8(c0765, 6270)
C8(n0899, -7373)
C8(c1175, 9633)
C8(c1501, 12299)
C8(c1847, 15137)
C8(n1961, -16069)
C8(c2053, 16819)
C8(n2562, -20995)
C8(c3072, 25172)

// Pass 1 rounds at bit 10 before >>11; pass 2 rounds at bit 17 before
// >>18 and adds 128<<18 (the +128 of the output; no sum reaches 2^31
// once the workspace is within ±16383, so adding it first is exact).
C8(rnd1, 1024)
C8(rnd2, 33685504)

// Bits above maxPass1 (16383): a workspace |value| with any of them set
// fails the bound.
C8(guard, -16384)

// Within each 128-bit lane, bytes k·4+r (column k of rows r) to r·4+k.
DATA tbytes<>+0(SB)/8, $0x0d0905010c080400
DATA tbytes<>+8(SB)/8, $0x0f0b07030e0a0602
DATA tbytes<>+16(SB)/8, $0x0d0905010c080400
DATA tbytes<>+24(SB)/8, $0x0f0b07030e0a0602
GLOBL tbytes<>(SB), RODATA|NOPTR, $32

// IDCT1D is one pass over 8 vectors of 8 lanes: inputs x0..x7 in Y0..Y7,
// outputs o0..o7 in Y8..Y15 before the final shift, rnd already added.
// Y0..Y7 are clobbered.
#define IDCT1D(rnd) \
	VPADDD  Y6, Y2, Y8; \
	VPMULLD c0541<>(SB), Y8, Y8; \
	VPMULLD c1847<>(SB), Y6, Y9; \
	VPSUBD  Y9, Y8, Y9; \
	VPMULLD c0765<>(SB), Y2, Y10; \
	VPADDD  Y10, Y8, Y10; \
	VPADDD  Y4, Y0, Y2; \
	VPSUBD  Y4, Y0, Y6; \
	VPSLLD  $13, Y2, Y2; \
	VPSLLD  $13, Y6, Y6; \
	VPADDD  rnd<>(SB), Y2, Y2; \
	VPADDD  rnd<>(SB), Y6, Y6; \
	VPADDD  Y10, Y2, Y0; \
	VPSUBD  Y10, Y2, Y4; \
	VPADDD  Y9, Y6, Y2; \
	VPSUBD  Y9, Y6, Y6; \
	VPADDD  Y1, Y7, Y8; \
	VPADDD  Y3, Y5, Y9; \
	VPADDD  Y3, Y7, Y10; \
	VPADDD  Y1, Y5, Y11; \
	VPADDD  Y11, Y10, Y12; \
	VPMULLD c1175<>(SB), Y12, Y12; \
	VPMULLD c0298<>(SB), Y7, Y7; \
	VPMULLD c2053<>(SB), Y5, Y5; \
	VPMULLD c3072<>(SB), Y3, Y3; \
	VPMULLD c1501<>(SB), Y1, Y1; \
	VPMULLD n0899<>(SB), Y8, Y8; \
	VPMULLD n2562<>(SB), Y9, Y9; \
	VPMULLD n1961<>(SB), Y10, Y10; \
	VPADDD  Y12, Y10, Y10; \
	VPMULLD n0390<>(SB), Y11, Y11; \
	VPADDD  Y12, Y11, Y11; \
	VPADDD  Y8, Y7, Y7; \
	VPADDD  Y10, Y7, Y7; \
	VPADDD  Y9, Y5, Y5; \
	VPADDD  Y11, Y5, Y5; \
	VPADDD  Y9, Y3, Y3; \
	VPADDD  Y10, Y3, Y3; \
	VPADDD  Y8, Y1, Y1; \
	VPADDD  Y11, Y1, Y1; \
	VPADDD  Y1, Y0, Y8; \
	VPSUBD  Y1, Y0, Y15; \
	VPADDD  Y3, Y2, Y9; \
	VPSUBD  Y3, Y2, Y14; \
	VPADDD  Y5, Y6, Y10; \
	VPSUBD  Y5, Y6, Y13; \
	VPADDD  Y7, Y4, Y11; \
	VPSUBD  Y7, Y4, Y12

// func idctAVX2(dst *byte, stride int, blk *[64]int32) int
// Returns 1 when the samples are written, 0 when the workspace bound
// fails (nothing written), -1 when idctGo must decide (nothing written).
TEXT ·idctAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ stride+8(FP), DX
	MOVQ blk+16(FP), SI

	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VMOVDQU 128(SI), Y4
	VMOVDQU 160(SI), Y5
	VMOVDQU 192(SI), Y6
	VMOVDQU 224(SI), Y7

	// Row 0 must survive <<13 (see the top).
	VPSLLD    $13, Y0, Y8
	VPSRAD    $13, Y8, Y8
	VPCMPEQD  Y0, Y8, Y8
	VPMOVMSKB Y8, AX
	CMPL      AX, $-1
	JNE       fallback

	// Pass 1: columns; o_k is workspace row k.
	IDCT1D(rnd1)
	VPSRAD $11, Y8, Y8
	VPSRAD $11, Y9, Y9
	VPSRAD $11, Y10, Y10
	VPSRAD $11, Y11, Y11
	VPSRAD $11, Y12, Y12
	VPSRAD $11, Y13, Y13
	VPSRAD $11, Y14, Y14
	VPSRAD $11, Y15, Y15

	// Bound: OR of |ws| below 2^14 (|ws| < 2^20, so VPABSD is exact).
	VPABSD Y8, Y0
	VPABSD Y9, Y1
	VPABSD Y10, Y2
	VPABSD Y11, Y3
	VPABSD Y12, Y4
	VPABSD Y13, Y5
	VPABSD Y14, Y6
	VPABSD Y15, Y7
	VPOR   Y1, Y0, Y0
	VPOR   Y3, Y2, Y2
	VPOR   Y5, Y4, Y4
	VPOR   Y7, Y6, Y6
	VPOR   Y2, Y0, Y0
	VPOR   Y6, Y4, Y4
	VPOR   Y4, Y0, Y0
	VPTEST guard<>(SB), Y0
	JNE    bad

	// Transpose: Y(k) = column k of the workspace, lane r = row r.
	VPUNPCKLDQ  Y9, Y8, Y0
	VPUNPCKHDQ  Y9, Y8, Y1
	VPUNPCKLDQ  Y11, Y10, Y2
	VPUNPCKHDQ  Y11, Y10, Y3
	VPUNPCKLDQ  Y13, Y12, Y4
	VPUNPCKHDQ  Y13, Y12, Y5
	VPUNPCKLDQ  Y15, Y14, Y6
	VPUNPCKHDQ  Y15, Y14, Y7
	VPUNPCKLQDQ Y2, Y0, Y8
	VPUNPCKHQDQ Y2, Y0, Y9
	VPUNPCKLQDQ Y3, Y1, Y10
	VPUNPCKHQDQ Y3, Y1, Y11
	VPUNPCKLQDQ Y6, Y4, Y12
	VPUNPCKHQDQ Y6, Y4, Y13
	VPUNPCKLQDQ Y7, Y5, Y14
	VPUNPCKHQDQ Y7, Y5, Y15
	VPERM2I128  $0x20, Y12, Y8, Y0
	VPERM2I128  $0x31, Y12, Y8, Y4
	VPERM2I128  $0x20, Y13, Y9, Y1
	VPERM2I128  $0x31, Y13, Y9, Y5
	VPERM2I128  $0x20, Y14, Y10, Y2
	VPERM2I128  $0x31, Y14, Y10, Y6
	VPERM2I128  $0x20, Y15, Y11, Y3
	VPERM2I128  $0x31, Y15, Y11, Y7

	// Pass 2: rows; o_k is output column k (+128 included).
	IDCT1D(rnd2)
	VPSRAD $18, Y8, Y8
	VPSRAD $18, Y9, Y9
	VPSRAD $18, Y10, Y10
	VPSRAD $18, Y11, Y11
	VPSRAD $18, Y12, Y12
	VPSRAD $18, Y13, Y13
	VPSRAD $18, Y14, Y14
	VPSRAD $18, Y15, Y15

	// Saturate to int16 then to 0..255 (together exactly the clamp):
	// lane h of Y0 holds bytes of columns 0..3, Y2 of 4..7, rows 4h..4h+3,
	// column-major; VPSHUFB makes them row-major, and the unpacks pair a
	// row's two halves: Y4 = rows 0,1 | 4,5; Y5 = rows 2,3 | 6,7.
	VPACKSSDW   Y9, Y8, Y0
	VPACKSSDW   Y11, Y10, Y1
	VPACKSSDW   Y13, Y12, Y2
	VPACKSSDW   Y15, Y14, Y3
	VPACKUSWB   Y1, Y0, Y0
	VPACKUSWB   Y3, Y2, Y2
	VMOVDQU     tbytes<>(SB), Y6
	VPSHUFB     Y6, Y0, Y0
	VPSHUFB     Y6, Y2, Y2
	VPUNPCKLDQ  Y2, Y0, Y4
	VPUNPCKHDQ  Y2, Y0, Y5
	VEXTRACTI128 $1, Y4, X6
	VEXTRACTI128 $1, Y5, X7

	LEAQ    (DX)(DX*2), R8
	LEAQ    (DI)(DX*4), R9
	VMOVQ   X4, (DI)
	VMOVHPS X4, (DI)(DX*1)
	VMOVQ   X5, (DI)(DX*2)
	VMOVHPS X5, (DI)(R8*1)
	VMOVQ   X6, (R9)
	VMOVHPS X6, (R9)(DX*1)
	VMOVQ   X7, (R9)(DX*2)
	VMOVHPS X7, (R9)(R8*1)
	VZEROUPPER
	MOVQ $1, ret+24(FP)
	RET

bad:
	VZEROUPPER
	MOVQ $0, ret+24(FP)
	RET

fallback:
	VZEROUPPER
	MOVQ $-1, ret+24(FP)
	RET
