// Package jpegx implements a JPEG decoder whose RGB output is byte for
// byte libjpeg-turbo's (and so PIL's and torchvision's) for the files
// most datasets hold, with none of libjpeg's per-image setup cost.
//
// libjpeg-turbo sets up every image anew (memory pools, colour and range
// tables, Huffman tables, module selection) before it decodes anything:
// for a 32×32 CIFAR JPEG that is more than half of the decode
// (loader/imagedec's BenchmarkDecodeBySize, scripts/libjpeg-costs.py).
// This decoder keeps its tables, planes and coefficient buffer between
// images, rebuilds a Huffman table only when its definition changes, and
// reproduces libjpeg-turbo's arithmetic exactly:
//
//   - progressive scans decoded step for step as jdphuff.c does, into its
//     16-bit coefficients, with the quantisation tables latched at each
//     component's first scan (jdinput.c);
//   - the accurate integer IDCT (jidctint.c, JDCT_ISLOW), with the
//     saturating output of its SIMD versions;
//   - "fancy" triangle-filter chroma upsampling for 4:2:0 and 4:2:2
//     (jdsample.c), with libjpeg's edge rows and columns;
//   - the fixed-point YCbCr→RGB tables (jdcolor.c), greyscale expanded to
//     RGB.
//
// What it decodes: baseline, extended-sequential and progressive Huffman
// JPEGs, 8-bit, greyscale or YCbCr at 4:4:4, 4:2:2 or 4:2:0. A sequential
// file is one interleaved scan, with or without restart intervals. A
// progressive file is any scan script libjpeg takes without a warning
// (spectral selection, successive approximation, interleaved or single
// DC scans, tables and other segments between scans), without restart
// intervals, whose DC and first nine AC coefficients (zig-zag) of every
// component end fully refined: otherwise libjpeg-turbo smooths the blocks
// (jdcoefct.c's block smoothing), which is not reproduced. Anything else —
// arithmetic coding, other subsamplings, RGB/CMYK colour, restart
// intervals in a progressive file, more than 500 scans (TurboJPEG's
// TJFLAG_LIMITSCANS), and any file libjpeg would warn about (a bad Huffman
// code, data cut short, stray bytes, a wrong restart marker, a scan out of
// progression order) or that makes it write outside a scan's band, or
// whose coefficients could overflow the 16-bit lanes of libjpeg-turbo's
// SIMD IDCT — returns ErrUnsupported before the result is trusted, and the
// caller decodes the file with libjpeg-turbo itself, so pixels and error
// messages stay libjpeg's.
//
// DecodeRGBCrop decodes a window of the image (a random resized crop's
// box): the file is read and checked in full, but a progressive file's
// blocks outside the window (and the upsampler's one-sample neighbours)
// skip the IDCT, and only the window is upsampled and converted.
//
// The output equals libjpeg-turbo's on the SIMD code paths every x86-64
// and arm64 build uses; libjpeg's plain C IDCT wraps instead of saturating
// for coefficients no encoder produces, where the two could differ.
//
// The arithmetic follows libjpeg-turbo's jdphuff.c, jidctint.c, jdsample.c,
// jdmainct.c and jdcolor.c (IJG and modified-BSD licences): this software
// is based in part on the work of the Independent JPEG Group.
//
// A Decoder is not safe for concurrent use; use one per goroutine.
package jpegx
