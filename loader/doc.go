// Package loader implements loaderd's data sources and its worker pool.
//
// A Source turns a dataset index into a label and uint8 pixels: the CIFAR
// binary formats and raw-pixel Arrow IPC through read-only memory maps,
// with no copy; image folders, tar shards (plain or WebDataset) and
// Hugging Face Parquet decoded into per-worker buffers; and a
// deterministic synthetic dataset that is the built-in default. Sources
// are named on command lines as FORMAT:PATH[?OPTIONS] and opened with Open.
//
// A Pool is a set of worker goroutines shared by every stream. A Loader is
// one stream: it plans batches with a sampler.Distributed, hands their
// samples to the pool in chunks, and delivers filled batches in order. Each
// batch lives in a pinned slot the Loader holds for its whole life, so the
// steady state allocates nothing. Output depends only on (seed, epoch,
// index), never on the number of workers or their scheduling.
//
// Sources, Pools and Loader.Release are safe for concurrent use;
// Loader.Next must be called from one goroutine at a time.
package loader
