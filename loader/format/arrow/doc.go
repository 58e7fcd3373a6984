// Package arrow implements raw-pixel Arrow IPC files (the file format,
// "Feather v2"), what loaderd convert writes, as the loader format
//
//	arrow:PATH[?KEY=VALUE&…]
//
// PATH is a file, a directory of .arrow files or a glob. A file has a
// pixel column of fixed_size_binary[H·W·C] (or fixed_size_list<uint8>)
// and an integer label column, with the image shape, layout and class
// names in the schema metadata (the Meta… keys). Files are mapped
// read-only and a sample's pixels are a view of the mapping: no decode, no
// copy. Options:
//
//	pixels=COLUMN, label=COLUMN   column names (default pixels, label)
//	size=WxH                      the shape when the metadata has none
//
// Import it for its side effect, as image/png is imported, to make the
// format known to loader.Open. Its sources are safe for concurrent use and
// implement loader.Labeler and loader.Namer.
package arrow
