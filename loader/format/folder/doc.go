// Package folder implements image folders laid out as torchvision's
// ImageFolder, ROOT/CLASS/…/FILE, as the loader format
//
//	folder:ROOT[?KEY=VALUE&…]
//
// Classes are the directories of ROOT, sorted; samples are ordered by
// class, then by path. Images (JPEG, PNG, GIF, BMP, TIFF, WebP) are read
// and decoded by loader/imagedec on each Sample into the worker's scratch,
// as H×W×3 U8 HWC. Options:
//
//	size=WxH          the dataset's image size; default: the first image's
//	maxpixels=N       refuse images declaring more pixels (default 64 Mpx)
//	resize=bilinear   stretch images of another size to the dataset's
//	                  (PIL's bilinear filter); without it they are errors
//
// Import it for its side effect, as image/png is imported, to make the
// format known to loader.Open. Its sources are safe for concurrent use and
// implement loader.Labeler.
package folder
