// Package jpegdec implements a JPEG decoder that reuses its memory from one
// image to the next.
//
// It is Go 1.26's image/jpeg decoder (reader.go, huffman.go, scan.go and
// dct.go, under Go's BSD licence in LICENSE) with these changes, so that a
// data loader decoding tens of thousands of small images a second neither
// allocates nor zeroes a 10 KiB decoder and a new image per call:
//
//   - a Decoder keeps the decoder state and the image planes between calls
//     and clears only what image/jpeg would have left zero;
//   - sub-images are set up in place instead of through SubImage;
//   - the package-level Decode and DecodeConfig became Decoder methods that
//     read from a byte slice;
//   - the internal imageutil helper, used only for YCbCrK images, became
//     image/draw;
//   - two sentinel errors met on every image are stored as error values,
//     so returning them does not allocate.
//
// Decoded pixels are identical to image/jpeg's. The image a Decoder returns
// is valid until its next call. A Decoder is not safe for concurrent use;
// use one per goroutine (or a sync.Pool of them).
package jpegdec
