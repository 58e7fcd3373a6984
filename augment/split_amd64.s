//go:build amd64 && !purego

#include "textflag.h"

// HWC → CHW through the channel tables (split_amd64.go), four pixels (12
// bytes) per step. On this Cascade Lake VPGATHERDD is microcoded (the
// Gather Data Sampling fix) at ~27 cycles per 8 lookups, slower than the
// Go loops, so the lookups are scalar loads; the speed-up is from loads
// and stores. Each step loads its 12 bytes as a quadword and a long and
// takes the indexes out with MOVBLZX of the low and high byte registers
// (not a byte load per index: the table loads already fill the load
// ports), and each plane's four outputs are built in an X register
// (VMOVD, VPINSRD from the table) and stored as one: a store per element
// was the Go loop's limit.
//
// R8 = lut, R9..R11 = the planes' rows, DI = byte offset in the output
// row, R15 = source step, R12 = source row, R14 = steps left in the row,
// R13 = rows left; AX, BX hold the step's bytes, CX, DX, SI indexes (the
// high byte registers can only move to registers without a REX prefix).

// FIRST sets lane 0 of X (and zeroes the rest) to table c's entry idx
// (c a byte offset, 1024 per channel); INS sets lane l.
#define FIRST(idx, c, X) VMOVD c(R8)(idx*4), X
#define INS(idx, c, l, X) VPINSRD $l, c(R8)(idx*4), X, X

#define PROLOGUE \
	MOVQ d0+0(FP), R9; \
	MOVQ d1+8(FP), R10; \
	MOVQ d2+16(FP), R11; \
	MOVQ s+24(FP), R12; \
	MOVQ lut+32(FP), R8; \
	MOVQ rows+40(FP), R13

#define ROW \
	MOVQ R12, R15; \
	XORQ DI, DI; \
	MOVQ steps+48(FP), R14

#define STORE \
	VMOVDQU X0, (R9)(DI*1); \
	VMOVDQU X1, (R10)(DI*1); \
	VMOVDQU X2, (R11)(DI*1); \
	ADDQ    $16, DI

// NEXTROW moves to the next row and loops to label l while rows are left.
#define NEXTROW(l) \
	MOVQ dstride+56(FP), AX; \
	ADDQ AX, R9; \
	ADDQ AX, R10; \
	ADDQ AX, R11; \
	ADDQ sstride+64(FP), R12; \
	DECQ R13; \
	JNZ  l

// func split4Fwd(d0, d1, d2 *uint32, s *byte, lut *[3][256]uint32, rows, steps, dstride, sstride int)
// Row r: source pixels s+r·sstride onwards, outputs dc+r·dstride onwards;
// rows, steps ≥ 1. Source byte k of a step (pixel k/3, channel k%3) is
// lane k/3 of X(k%3).
TEXT ·split4Fwd(SB), NOSPLIT, $0-72
	PROLOGUE

frow:
	ROW

fstep:
	MOVQ    (R15), AX
	MOVL    8(R15), BX
	MOVBLZX AL, CX  // byte 0
	MOVBLZX AH, DX  // 1
	FIRST(CX, 0, X0)
	FIRST(DX, 1024, X1)
	SHRQ    $16, AX
	MOVBLZX AL, CX  // 2
	MOVBLZX AH, DX  // 3
	FIRST(CX, 2048, X2)
	INS(DX, 0, 1, X0)
	SHRQ    $16, AX
	MOVBLZX AL, CX  // 4
	MOVBLZX AH, DX  // 5
	INS(CX, 1024, 1, X1)
	INS(DX, 2048, 1, X2)
	SHRQ    $16, AX
	MOVBLZX AL, CX  // 6
	MOVBLZX AH, DX  // 7
	INS(CX, 0, 2, X0)
	INS(DX, 1024, 2, X1)
	MOVBLZX BL, CX  // 8
	MOVBLZX BH, DX  // 9
	INS(CX, 2048, 2, X2)
	INS(DX, 0, 3, X0)
	SHRL    $16, BX
	MOVBLZX BL, CX  // 10
	MOVBLZX BH, DX  // 11
	INS(CX, 1024, 3, X1)
	INS(DX, 2048, 3, X2)
	STORE
	ADDQ $12, R15
	DECQ R14
	JNZ  fstep
	NEXTROW(frow)
	RET

// func split4Rev(d0, d1, d2 *uint32, s *byte, lut *[3][256]uint32, rows, steps, dstride, sstride int)
// split4Fwd mirrored: s is row 0's last four pixels and the source steps
// backwards (12 bytes) while the output steps forwards. Source byte k is
// lane 3-k/3 of X(k%3); bytes 8..11 come first, as they hold every
// plane's lane 0 (the VMOVD).
TEXT ·split4Rev(SB), NOSPLIT, $0-72
	PROLOGUE

rrow:
	ROW

rstep:
	MOVQ    (R15), AX
	MOVL    8(R15), BX
	MOVBLZX BL, SI  // byte 8
	MOVBLZX BH, DX  // 9
	SHRL    $16, BX
	MOVBLZX BL, CX  // 10
	FIRST(DX, 0, X0)
	FIRST(CX, 1024, X1)
	MOVBLZX BH, DX  // 11
	FIRST(DX, 2048, X2)
	INS(SI, 2048, 1, X2)
	MOVBLZX AL, CX  // 0
	MOVBLZX AH, DX  // 1
	INS(CX, 0, 3, X0)
	INS(DX, 1024, 3, X1)
	SHRQ    $16, AX
	MOVBLZX AL, CX  // 2
	MOVBLZX AH, DX  // 3
	INS(CX, 2048, 3, X2)
	INS(DX, 0, 2, X0)
	SHRQ    $16, AX
	MOVBLZX AL, CX  // 4
	MOVBLZX AH, DX  // 5
	INS(CX, 1024, 2, X1)
	INS(DX, 2048, 2, X2)
	SHRQ    $16, AX
	MOVBLZX AL, CX  // 6
	MOVBLZX AH, DX  // 7
	INS(CX, 0, 1, X0)
	INS(DX, 1024, 1, X1)
	STORE
	SUBQ $12, R15
	DECQ R14
	JNZ  rstep
	NEXTROW(rrow)
	RET

// func split16(d0, d1, d2, s *byte, masks *[9][16]byte, rows, steps, dstride, sstride, sstep int)
// HWC → CHW for uint8 output, whose tables are the identity: sixteen
// pixels (48 bytes, three X loads) per step, each plane's sixteen bytes
// gathered from the three with VPSHUFB and ORed. masks[3c+r] picks plane
// c's bytes out of load r (0x80 elsewhere); split8Masks builds them, for
// a forward row and a mirrored one. The source moves sstep bytes per step
// (+48, or -48 when mirrored: s is then the row's last sixteen pixels),
// the outputs sixteen.
TEXT ·split16(SB), NOSPLIT, $0-80
	MOVQ    d0+0(FP), R9
	MOVQ    d1+8(FP), R10
	MOVQ    d2+16(FP), R11
	MOVQ    s+24(FP), R12
	MOVQ    masks+32(FP), R8
	MOVQ    rows+40(FP), R13
	MOVQ    sstep+72(FP), BX
	VMOVDQU 0(R8), X3
	VMOVDQU 16(R8), X4
	VMOVDQU 32(R8), X5
	VMOVDQU 48(R8), X6
	VMOVDQU 64(R8), X7
	VMOVDQU 80(R8), X8
	VMOVDQU 96(R8), X9
	VMOVDQU 112(R8), X10
	VMOVDQU 128(R8), X11

brow:
	MOVQ R12, R15
	XORQ DI, DI
	MOVQ steps+48(FP), R14

bstep:
	VMOVDQU 0(R15), X0
	VMOVDQU 16(R15), X1
	VMOVDQU 32(R15), X2
	VPSHUFB X3, X0, X12
	VPSHUFB X4, X1, X13
	VPOR    X13, X12, X12
	VPSHUFB X5, X2, X13
	VPOR    X13, X12, X12
	VMOVDQU X12, (R9)(DI*1)
	VPSHUFB X6, X0, X12
	VPSHUFB X7, X1, X13
	VPOR    X13, X12, X12
	VPSHUFB X8, X2, X13
	VPOR    X13, X12, X12
	VMOVDQU X12, (R10)(DI*1)
	VPSHUFB X9, X0, X12
	VPSHUFB X10, X1, X13
	VPOR    X13, X12, X12
	VPSHUFB X11, X2, X13
	VPOR    X13, X12, X12
	VMOVDQU X12, (R11)(DI*1)
	ADDQ    $16, DI
	ADDQ    BX, R15
	DECQ    R14
	JNZ     bstep

	MOVQ dstride+56(FP), AX
	ADDQ AX, R9
	ADDQ AX, R10
	ADDQ AX, R11
	ADDQ sstride+64(FP), R12
	DECQ R13
	JNZ  brow
	RET
