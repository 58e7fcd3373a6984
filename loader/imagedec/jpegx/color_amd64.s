//go:build amd64 && !purego

#include "textflag.h"

// Constants: PSHUFB masks that interleave 16 R, G and B bytes into 48
// bytes of RGB (shufOC: output block O, channel C), then the fixed-point
// factors of jdcolor.c's tables as int32 lanes, and h2v2's rounding.
DATA shuf0r<>+0(SB)/8, $0x8002808001808000
DATA shuf0r<>+8(SB)/8, $0x0580800480800380
GLOBL shuf0r<>(SB), RODATA|NOPTR, $16
DATA shuf0g<>+0(SB)/8, $0x0280800180800080
DATA shuf0g<>+8(SB)/8, $0x8080048080038080
GLOBL shuf0g<>(SB), RODATA|NOPTR, $16
DATA shuf0b<>+0(SB)/8, $0x8080018080008080
DATA shuf0b<>+8(SB)/8, $0x8004808003808002
GLOBL shuf0b<>(SB), RODATA|NOPTR, $16
DATA shuf1r<>+0(SB)/8, $0x8080078080068080
DATA shuf1r<>+8(SB)/8, $0x800a808009808008
GLOBL shuf1r<>(SB), RODATA|NOPTR, $16
DATA shuf1g<>+0(SB)/8, $0x8007808006808005
DATA shuf1g<>+8(SB)/8, $0x0a80800980800880
GLOBL shuf1g<>(SB), RODATA|NOPTR, $16
DATA shuf1b<>+0(SB)/8, $0x0780800680800580
DATA shuf1b<>+8(SB)/8, $0x8080098080088080
GLOBL shuf1b<>(SB), RODATA|NOPTR, $16
DATA shuf2r<>+0(SB)/8, $0x0d80800c80800b80
DATA shuf2r<>+8(SB)/8, $0x80800f80800e8080
GLOBL shuf2r<>(SB), RODATA|NOPTR, $16
DATA shuf2g<>+0(SB)/8, $0x80800c80800b8080
DATA shuf2g<>+8(SB)/8, $0x800f80800e80800d
GLOBL shuf2g<>(SB), RODATA|NOPTR, $16
DATA shuf2b<>+0(SB)/8, $0x800c80800b80800a
DATA shuf2b<>+8(SB)/8, $0x0f80800e80800d80
GLOBL shuf2b<>(SB), RODATA|NOPTR, $16
DATA c128<>+0(SB)/8, $0x0000008000000080
DATA c128<>+8(SB)/8, $0x0000008000000080
DATA c128<>+16(SB)/8, $0x0000008000000080
DATA c128<>+24(SB)/8, $0x0000008000000080
GLOBL c128<>(SB), RODATA|NOPTR, $32
DATA chalf<>+0(SB)/8, $0x0000800000008000
DATA chalf<>+8(SB)/8, $0x0000800000008000
DATA chalf<>+16(SB)/8, $0x0000800000008000
DATA chalf<>+24(SB)/8, $0x0000800000008000
GLOBL chalf<>(SB), RODATA|NOPTR, $32
DATA cR<>+0(SB)/8, $0x000166e9000166e9
DATA cR<>+8(SB)/8, $0x000166e9000166e9
DATA cR<>+16(SB)/8, $0x000166e9000166e9
DATA cR<>+24(SB)/8, $0x000166e9000166e9
GLOBL cR<>(SB), RODATA|NOPTR, $32
DATA cGb<>+0(SB)/8, $0xffffa7e6ffffa7e6
DATA cGb<>+8(SB)/8, $0xffffa7e6ffffa7e6
DATA cGb<>+16(SB)/8, $0xffffa7e6ffffa7e6
DATA cGb<>+24(SB)/8, $0xffffa7e6ffffa7e6
GLOBL cGb<>(SB), RODATA|NOPTR, $32
DATA cGr<>+0(SB)/8, $0xffff492effff492e
DATA cGr<>+8(SB)/8, $0xffff492effff492e
DATA cGr<>+16(SB)/8, $0xffff492effff492e
DATA cGr<>+24(SB)/8, $0xffff492effff492e
GLOBL cGr<>(SB), RODATA|NOPTR, $32
DATA cB<>+0(SB)/8, $0x0001c5a20001c5a2
DATA cB<>+8(SB)/8, $0x0001c5a20001c5a2
DATA cB<>+16(SB)/8, $0x0001c5a20001c5a2
DATA cB<>+24(SB)/8, $0x0001c5a20001c5a2
GLOBL cB<>(SB), RODATA|NOPTR, $32
DATA w8<>+0(SB)/8, $0x0008000800080008
DATA w8<>+8(SB)/8, $0x0008000800080008
DATA w8<>+16(SB)/8, $0x0008000800080008
DATA w8<>+24(SB)/8, $0x0008000800080008
GLOBL w8<>(SB), RODATA|NOPTR, $32
DATA w7<>+0(SB)/8, $0x0007000700070007
DATA w7<>+8(SB)/8, $0x0007000700070007
DATA w7<>+16(SB)/8, $0x0007000700070007
DATA w7<>+24(SB)/8, $0x0007000700070007
GLOBL w7<>(SB), RODATA|NOPTR, $32

// PACK clamps two vectors of 8 int32 (pixels 0-7, 8-15) to bytes, in
// order, into the low 16 bytes of lo (hi is clobbered). Packing through
// int16 with saturation, then to unsigned bytes with saturation, is a
// clamp to 0..255 for every int32.
#define PACK(lo, hi, xlo, xhi) \
	VPACKSSDW hi, lo, lo; \
	VPERMQ    $0xD8, lo, lo; \
	VEXTRACTI128 $1, lo, xhi; \
	VPACKUSWB xhi, xlo, xlo

// func yccRGBAVX2(out, y, cb, cr *byte, n int)
// Converts n pixels (a multiple of 16) as ycc_rgb_convert does.
TEXT ·yccRGBAVX2(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ cb+16(FP), BX
	MOVQ cr+24(FP), CX
	MOVQ n+32(FP), DX
	VMOVDQU c128<>(SB), Y15
	VMOVDQU chalf<>(SB), Y14
loop:
	VPMOVZXBD (SI), Y0
	VPMOVZXBD 8(SI), Y1
	VPMOVZXBD (BX), Y2
	VPMOVZXBD 8(BX), Y3
	VPMOVZXBD (CX), Y4
	VPMOVZXBD 8(CX), Y5
	VPSUBD Y15, Y2, Y2
	VPSUBD Y15, Y3, Y3
	VPSUBD Y15, Y4, Y4
	VPSUBD Y15, Y5, Y5

	// R = y + (91881·cr' + 2^15) >> 16
	VPMULLD cR<>(SB), Y4, Y6
	VPMULLD cR<>(SB), Y5, Y7
	VPADDD  Y14, Y6, Y6
	VPADDD  Y14, Y7, Y7
	VPSRAD  $16, Y6, Y6
	VPSRAD  $16, Y7, Y7
	VPADDD  Y0, Y6, Y6
	VPADDD  Y1, Y7, Y7
	PACK(Y6, Y7, X6, X7)

	// G = y + (-22554·cb' + 2^15 - 46802·cr') >> 16
	VPMULLD cGb<>(SB), Y2, Y8
	VPMULLD cGb<>(SB), Y3, Y9
	VPMULLD cGr<>(SB), Y4, Y10
	VPMULLD cGr<>(SB), Y5, Y11
	VPADDD  Y10, Y8, Y8
	VPADDD  Y11, Y9, Y9
	VPADDD  Y14, Y8, Y8
	VPADDD  Y14, Y9, Y9
	VPSRAD  $16, Y8, Y8
	VPSRAD  $16, Y9, Y9
	VPADDD  Y0, Y8, Y8
	VPADDD  Y1, Y9, Y9
	PACK(Y8, Y9, X8, X9)

	// B = y + (116130·cb' + 2^15) >> 16
	VPMULLD cB<>(SB), Y2, Y10
	VPMULLD cB<>(SB), Y3, Y11
	VPADDD  Y14, Y10, Y10
	VPADDD  Y14, Y11, Y11
	VPSRAD  $16, Y10, Y10
	VPSRAD  $16, Y11, Y11
	VPADDD  Y0, Y10, Y10
	VPADDD  Y1, Y11, Y11
	PACK(Y10, Y11, X10, X11)

	// Interleave R (X6), G (X8), B (X10) into 48 bytes.
	VPSHUFB shuf0r<>(SB), X6, X0
	VPSHUFB shuf0g<>(SB), X8, X1
	VPSHUFB shuf0b<>(SB), X10, X2
	VPOR    X1, X0, X0
	VPOR    X2, X0, X0
	VMOVDQU X0, (DI)
	VPSHUFB shuf1r<>(SB), X6, X0
	VPSHUFB shuf1g<>(SB), X8, X1
	VPSHUFB shuf1b<>(SB), X10, X2
	VPOR    X1, X0, X0
	VPOR    X2, X0, X0
	VMOVDQU X0, 16(DI)
	VPSHUFB shuf2r<>(SB), X6, X0
	VPSHUFB shuf2g<>(SB), X8, X1
	VPSHUFB shuf2b<>(SB), X10, X2
	VPOR    X1, X0, X0
	VPOR    X2, X0, X0
	VMOVDQU X0, 32(DI)

	ADDQ $16, SI
	ADDQ $16, BX
	ADDQ $16, CX
	ADDQ $48, DI
	SUBQ $16, DX
	JNZ  loop
	VZEROUPPER
	RET

// func h2v2AVX2(out, near, far *byte, n int)
// h2v2 fancy upsampling of n chroma columns (a multiple of 16) into 2n
// outputs; near[-1], far[-1], near[n] and far[n] must be readable (the
// edge columns' stand-ins).
TEXT ·h2v2AVX2(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ near+8(FP), SI
	MOVQ far+16(FP), BX
	MOVQ n+24(FP), DX
	VMOVDQU w8<>(SB), Y14
	VMOVDQU w7<>(SB), Y15
h2loop:
	VPMOVZXBW (SI), Y0
	VPMOVZXBW (BX), Y1
	VPMOVZXBW -1(SI), Y2
	VPMOVZXBW -1(BX), Y3
	VPMOVZXBW 1(SI), Y4
	VPMOVZXBW 1(BX), Y5
	// column sums 3·near + far: this (Y6), last (Y7), next (Y8)
	VPSLLW $1, Y0, Y6
	VPADDW Y0, Y6, Y6
	VPADDW Y1, Y6, Y6
	VPSLLW $1, Y2, Y7
	VPADDW Y2, Y7, Y7
	VPADDW Y3, Y7, Y7
	VPSLLW $1, Y4, Y8
	VPADDW Y4, Y8, Y8
	VPADDW Y5, Y8, Y8
	// 3·this
	VPSLLW $1, Y6, Y9
	VPADDW Y6, Y9, Y9
	// even = (3·this + last + 8) >> 4, odd = (3·this + next + 7) >> 4
	VPADDW Y7, Y9, Y10
	VPADDW Y14, Y10, Y10
	VPSRLW $4, Y10, Y10
	VPADDW Y8, Y9, Y11
	VPADDW Y15, Y11, Y11
	VPSRLW $4, Y11, Y11
	// interleave even and odd, then bytes: in each 128-bit lane the
	// low and high word halves hold outputs in order
	VPUNPCKLWD Y11, Y10, Y12
	VPUNPCKHWD Y11, Y10, Y13
	VPACKUSWB  Y13, Y12, Y12
	VMOVDQU    Y12, (DI)
	ADDQ $16, SI
	ADDQ $16, BX
	ADDQ $32, DI
	SUBQ $16, DX
	JNZ  h2loop
	VZEROUPPER
	RET
