// Package loader implements loaderd's data path: the Source interface and
// its registry of formats, and the worker pool that fills batches.
//
// A Source turns a dataset index into a label and uint8 pixels. Sources
// are named on command lines as FORMAT:PATH[?OPTIONS] and opened with
// Open, which finds FORMAT among the formats registered with
// RegisterFormat and applies the options every format takes (holdout= and
// part=, see Split). The formats live in their own packages under
// loader/format/ (cifar, synthetic, folder, tar, arrow, parquet), each
// registering itself when imported, as image/png does for image.Decode;
// loader/format/all imports them all. The formats of encoded images decode
// them with loader/imagedec. This package imports none of them.
//
// A Pool is a set of worker goroutines shared by every stream. A Loader is
// one stream: it plans batches with a sampler.Distributed, hands their
// samples to the pool in chunks, and delivers filled batches in order. Each
// batch lives in a pinned slot the Loader holds for its whole life, so the
// steady state allocates nothing. Output depends only on (seed, epoch,
// index), never on the number of workers or their scheduling. A Skipper
// applies the ErrorPolicy to a sample its source cannot read. A worker
// that faults reading a memory-mapped file that shrank under it (see
// RegisterMapping) makes that sample an ErrFault error, named through the
// source's Namer, instead of crashing the process.
//
// Open, RegisterFormat, Sources, Pools, Skippers and Loader.Release are
// safe for concurrent use; Loader.Next must be called from one goroutine
// at a time.
package loader
