// Package folder implements image folders laid out as torchvision's
// ImageFolder, ROOT/CLASS/…/FILE, as the loader format
//
//	folder:ROOT[?KEY=VALUE&…]
//
// Classes are the directories of ROOT, sorted; samples are ordered by
// class, then by path. Images (JPEG, PNG, GIF, BMP, TIFF, WebP) are read
// and decoded by loader/imagedec on each Sample into the worker's scratch,
// as H×W×3 U8 HWC. Only regular files (or links to them) are read: a FIFO,
// a device or a socket is an error naming it (loader.ErrNotRegular), and
// never blocks a worker. Options:
//
//	size=WxH          the dataset's image size; default: the first image's,
//	                  when the first 32 agree (imagedec.ProbeRecords), else
//	                  size=any is implied
//	size=any          images of varying size, each kept at its own (a
//	                  loader.SizedSource, for a pipeline opening with resize
//	                  or crop ops); JPEGs decode at the DCT scale the ops
//	                  allow; maxpixels then defaults to 16 Mpx
//	exact=torchvision never decode at a DCT scale: the crops are
//	                  torchvision's bytes, at the full decode's cost
//	maxpixels=N       refuse images declaring more pixels (default 64 Mpx)
//	maxbytes=N        refuse image files of more bytes, before reading
//	                  them (default 64 MiB)
//	resize=bilinear   stretch images of another size to the dataset's
//	                  (PIL's bilinear filter); without it they are errors
//	decoder=turbo|go  the JPEG decoder: libjpeg-turbo, PIL's pixels (the
//	                  default where libturbojpeg.so.0 loads), or Go's
//
// Import it for its side effect, as image/png is imported, to make the
// format known to loader.Open. Its sources are safe for concurrent use and
// implement loader.Labeler and loader.Namer.
package folder
