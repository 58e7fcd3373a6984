// Package convert implements `loaderd convert`: it decodes a dataset once
// into raw-pixel Arrow IPC shards (what FFCV calls raw mode), so that the
// training hot path maps pixels instead of decoding them.
//
// Run is safe for concurrent use with distinct Options; one Run uses
// Options.Workers goroutines of its own.
package convert
