// Package arrow implements Arrow IPC files (the file format, "Feather
// v2") as the loader format
//
//	arrow:PATH[?KEY=VALUE&…]
//
// PATH is a file, a directory of .arrow files or a glob. A file has an
// image column and an integer label column, and holds one of two kinds:
//
//   - raw pixels, what loaderd convert writes: a column of
//     fixed_size_binary[H·W·C] (or fixed_size_list<uint8>), with the image
//     shape, layout and class names in the schema metadata (the Meta…
//     keys). A sample's pixels are a view of the mapping: no decode, no
//     copy. All have one size, so size=any is refused, naming the column.
//   - encoded images (JPEG, PNG, …): a binary or large_binary column, or
//     Hugging Face's struct<bytes: binary, path: string>. A sample's bytes
//     are a view of the mapping, decoded by loader/imagedec into the
//     worker's scratch as the tar format decodes its members: at one size
//     (size=WxH, else the first image's when the first images agree), or
//     with size=any (implied when they differ) each at its own
//     (a loader.SizedSource); class names from loaderd.classes, else the
//     labels.
//
// Which kind is read is decided by the first file's column type. Files
// are mapped read-only and their offsets checked at open. Options:
//
//	pixels=COLUMN or image=COLUMN   the image column (default: the first of
//	                                pixels, image, img the file has)
//	label=COLUMN                    default label; encoded images: a list<int>
//	                                column makes the dataset multi-label (a
//	                                loader.FieldSource), each row's classes its
//	                                label set, its label the first; a null or
//	                                empty set fails the open, naming the row
//	fields=COLUMN,…                 encoded images: carry these binary or string
//	                                columns to the clients as bytes, views of the
//	                                mapping; a null cell is absent
//	maxfieldbytes=N                 the most bytes one field may have (default
//	                                64 KiB); a larger one fails its sample, naming
//	                                the file, row and column
//	size=WxH                        raw: the shape when the metadata has none;
//	                                encoded: as for loader/format/folder
//	size=any, maxpixels=N, resize=bilinear, maxbytes=N, decoder=turbo|go,
//	exact=torchvision               encoded images only, as for loader/format/tar
//
// Import it for its side effect, as image/png is imported, to make the
// format known to loader.Open. Its sources are safe for concurrent use and
// implement loader.Labeler and loader.Namer.
package arrow
