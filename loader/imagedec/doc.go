// Package imagedec implements the image decoding of the formats that hold
// encoded images (folder, tar, parquet, arrow): JPEG, PNG, GIF, BMP, TIFF and
// WebP, told apart by content, into H×W×3 RGB bytes in HWC order, with
// PIL's conversions and, on request, its bilinear resize. JPEG goes
// through libjpeg-turbo, loaded at run time, and this package's jpegx
// (PIL's pixels, allocation-free) where the library loads, and through
// Go's image/jpeg elsewhere or with decoder=go (see Backend).
//
// A Decoder checks an image's header before decoding it, so a
// decompression bomb or an image of the wrong size costs nothing. Errors
// wrap this package's sentinels or loader.ErrCorrupt and
// loader.ErrTruncated.
//
// Source is the loader.Source of those formats, written once: a format
// gives its Records (each record's label, where it lives, its bytes) and
// embeds the Source, which checks indices, maxbytes= and labels, names
// failing records, and decodes. For images of varying size the flow is
// one-way: Decoder.DecodeSized takes what the caller wants as plain data
// (loader.Want: a DCT scale, a crop box) and reports what it decoded
// (loader.Decoded), calling nothing back.
//
// A Decoder is not safe for concurrent use; a Pool, which lends one to
// each worker, is, and so is a Source whose Records are. IsImageName and
// Size are safe for concurrent use.
package imagedec
