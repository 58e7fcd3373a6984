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
//	decoder=turbo|go, exact=torchvision   as for loader/format/folder
//	                                  (without size=, s3:// shards read only
//	                                  the first member's size: say size=any)
//	maxbytes=N                        refuse members of more bytes (default 64 MiB)
//	layout=folder|webdataset          default: detected
//	root=DIR                          folder layout: the directory above the classes
//	image=EXT, label=EXT              webdataset fields (default: the image, cls)
//	fields=EXT,…                      webdataset: carry each sample's members of these
//	                                  extensions to the clients as bytes (a
//	                                  loader.FieldSource); a sample without one has
//	                                  it absent, not an error
//	maxfieldbytes=N                   the most bytes one field may have (default
//	                                  64 KiB); a larger one fails its sample,
//	                                  naming the member
//	labels=EXT                        webdataset, multi-label: each sample's classes
//	                                  are its EXT member, ints separated by
//	                                  whitespace or commas (at most 64 bytes, kept
//	                                  in the index as .cls labels are); its label is
//	                                  the first; a sample without one fails the open
//	order=uniform|shards[:W]          the sampler's shuffle: uniform over all samples
//	                                  (default), or shard-shuffle: shards in random
//	                                  order, samples mixed W shards at a time
//	                                  (default 4; see sampler.Shards); order=torch,
//	                                  torch's DistributedSampler order, is every
//	                                  format's option (loader.Open)
//	index=auto|scan|whole             s3:// only: how a shard not in the cache is
//	                                  indexed: auto, its sidecar SHARD.tar.idx
//	                                  (loaderd index) if current, else its headers
//	                                  by ranged reads; scan, the headers; whole,
//	                                  fetch whole shards before the open returns
//
// PATH may be s3://BUCKET/KEY, a prefix, a glob or a {000..009} range
// (loader/objstore). Unless index=whole, the open indexes each shard
// without downloading it and returns; a sample is then one ranged GET of
// its header and data until its shard's background fill into the cache is
// verified, then a slice of the mapped cache file. Prefetch (called by
// the loader as it plans batches) fills the shards of the next batches
// first. A sidecar whose size or MD5 differs from the shard is ignored
// with a log line; a ranged read checks the tar header before the member
// (its checksum and size, and the member's name, a PAX or GNU long name
// included), and a filled shard is indexed again and compared. A sidecar
// that names a member differently from its header (two members' names
// swapped) is dropped, logged naming the shard and the member, and
// counted (SidecarsDropped); the shard is re-indexed from its headers
// and its samples are the tar's, as from a local copy; where that would
// change the dataset (its samples, classes, or order across shards), the
// shard's samples fail (loader.ErrCorrupt). A wrong index never decodes
// the wrong bytes, nor gives an image another's label.
// A dataset larger than the cache streams through it: only the shards
// Prefetch asks for are filled, and with order=shards the shards of
// windows already read are unmapped and let go to make room; in the
// uniform order the shards that fit stay and the rest are ranged reads
// (docs/DEPLOY.md).
//
// The index and its sidecar list every member, so fields= and labels=
// need no new index: the fields are found at open, and read as slices of
// the same mapping as the image. fields= with s3:// shards needs
// index=whole.
//
// Only regular members are read; directories, links and devices are not
// part of the layout. A member whose name is absolute or has a ".." element
// fails the open, naming it: it could pose as a sample of another class.
//
// Import it for its side effect, as image/png is imported, to make the
// format known to loader.Open. Its sources are safe for concurrent use and
// implement loader.Labeler, loader.Namer, loader.ShardOrderer,
// loader.Prefetcher and loader.FieldSource.
package tar
