// Package convert implements `loaderd convert`: it decodes a dataset once
// into raw-pixel Arrow IPC shards (what FFCV calls raw mode), so that the
// training hot path maps pixels instead of decoding them. A source of
// images of varying size (size=any) has no one size to store and is
// refused. Run opens the
// source with loader.Open, so its format must be registered: the program
// imports the formats it takes (cmd/loaderd/formats.go). ArrowWriter
// writes the shards; ParquetWriter writes the Parquet fixtures of tests.
//
// Run is safe for concurrent use with distinct Options; one Run uses
// Options.Workers goroutines of its own. The writers are not safe for
// concurrent use.
package convert
