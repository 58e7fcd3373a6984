// Package all implements nothing of its own: it imports every format
// loaderd ships (cifar, synthetic, folder, tar, arrow, parquet) for the
// side effect of registering them with loader.RegisterFormat, for the
// tests, benchmarks and tools that take any FORMAT:PATH. Like the formats
// it imports, it is safe for concurrent use.
package all

import (
	_ "github.com/loaderd/loaderd/loader/format/arrow"
	_ "github.com/loaderd/loaderd/loader/format/cifar"
	_ "github.com/loaderd/loaderd/loader/format/folder"
	_ "github.com/loaderd/loaderd/loader/format/parquet"
	_ "github.com/loaderd/loaderd/loader/format/synthetic"
	_ "github.com/loaderd/loaderd/loader/format/tar"
)
