// Package tar implements tar shards of images, read without extracting
// them, as the loader format
//
//	tar:PATH[?KEY=VALUE&…]
//
// PATH is a file, a directory of .tar files or a glob ('?' starts the
// options, so use [0-9] rather than ? in globs). Each shard is indexed once
// at open (headers only) and then mapped read-only: a sample is a slice of
// the mapping, decoded by loader/imagedec into the worker's scratch, with
// no read and no copy. Two layouts:
//
//   - folder: the image-folder layout inside the archives,
//     [ROOT/]CLASS/…/FILE, with classes sorted and samples ordered by
//     class and path across all shards, exactly as the folder format
//     orders the extracted files. ROOT is the directory every image shares
//     (train/ in train/cat/0001.jpg) unless root= names it.
//   - webdataset: KEY.jpg (or another image extension) beside KEY.cls
//     holding the label as decimal text; samples in shard and member
//     order; classes are "0" to the largest label. Chosen when any member
//     ends in ".cls" (the label field), or with layout=webdataset.
//
// Options:
//
//	size=WxH, maxpixels=N, resize=bilinear   as for loader/format/folder
//	size=any                          images of varying size, each kept at its
//	                                  own (a loader.SizedSource, for a pipeline
//	                                  opening with resize or crop ops); JPEGs
//	                                  decode at the DCT scale the ops allow;
//	                                  maxpixels defaults to 16 Mpx
//	decoder=turbo|go                  as for loader/format/folder
//	maxbytes=N                        refuse members of more bytes (default 64 MiB)
//	layout=folder|webdataset          default: detected
//	root=DIR                          folder layout: the directory above the classes
//	image=EXT, label=EXT              webdataset fields (default: the image, cls)
//
// Only regular members are read; directories, links and devices are not
// part of the layout. A member whose name is absolute or has a ".." element
// fails the open, naming it: it could pose as a sample of another class.
//
// Import it for its side effect, as image/png is imported, to make the
// format known to loader.Open. Its sources are safe for concurrent use and
// implement loader.Labeler and loader.Namer.
package tar
