// Package parquet implements image datasets as Hugging Face datasets
// stores them in Parquet, as the loader format
//
//	parquet:PATH[?KEY=VALUE&…]
//
// PATH is a file, a directory of .parquet files or a glob. A file has an
// image column img: struct<bytes: binary, path: string> holding PNG or
// JPEG files (a plain binary column works too) and an integer label
// column. Class names come from the "huggingface" file metadata
// (features.LABEL.names) when present, else "0" to the largest label.
// Pages are compressed and cannot be sliced per row, so the encoded images
// are read once at open into memory (about the files' size) and decoded by
// loader/imagedec on each Sample; for datasets larger than memory, convert
// to Arrow. Options:
//
//	image=COLUMN    default img, else image
//	label=COLUMN    default label; a list<int> column (Hugging Face's
//	                Sequence(ClassLabel)) makes the dataset multi-label (a
//	                loader.FieldSource): each row's classes its label set,
//	                its label the first; a null or empty set fails the open
//	fields=COLUMN,… carry these binary or string columns to the clients as
//	                bytes, read at open into memory as the images are; a
//	                null cell is absent
//	maxfieldbytes=N the most bytes one field may have (default 64 KiB); a
//	                larger one fails its sample, naming the file, row and
//	                column
//	size=WxH, maxpixels=N, resize=bilinear, maxbytes=N   as for loader/format/folder
//	size=any        images of varying size, each kept at its own (a
//	                loader.SizedSource, for a pipeline opening with resize
//	                or crop ops), decoded as loader/format/tar decodes them;
//	                maxpixels then defaults to 16 Mpx
//	decoder=turbo|go, exact=torchvision                  as for loader/format/folder
//
// Import it for its side effect, as image/png is imported, to make the
// format known to loader.Open. Its sources are safe for concurrent use and
// implement loader.Labeler and loader.Namer.
package parquet
