// Package loader implements loaderd's data path: the Source interface and
// its registry of formats, and the worker pool that fills batches.
//
// A Source turns a dataset index into a label and uint8 pixels. Sources
// are named on command lines as FORMAT:PATH[?OPTIONS] and opened with
// Open, which finds FORMAT among the formats registered with
// RegisterFormat and applies the options every format takes (holdout= and
// part=, see Split; order=torch, see OrderOf; sampler= and samples=, see WeightsOf). The formats live in their own packages under
// loader/format/ (cifar, synthetic, folder, tar, arrow, parquet), each
// registering itself when imported, as image/png does for image.Decode;
// loader/format/all imports them all. The formats of encoded images decode
// them with loader/imagedec. This package imports none of them.
//
// Besides Source, a source may implement optional interfaces: Namer,
// Labeler, SizedSource (images of varying size), ShardOrderer, Prefetcher,
// DecoderNamer, Digester (what Fingerprint hashes beyond names and
// labels) and FieldSource (extra fields passed through as bytes, and
// label sets, which the Loader reads into each Batch beside the image:
// Batch.Field, Batch.LabelSet). Which of them it really has is its capability set,
// Caps(src), a Cap of CapNamer, CapLabeler, CapSized, …; As[T](src)
// returns it as one of them when it has that capability. A source that
// wraps another (a Split part, a decoded cache of loader/cache) embeds a
// Wrapper, made by Wrap: it then has every method of every optional
// interface, passing through to the wrapped source those it does not
// override, and advertises exactly the wrapped source's capabilities,
// computed once. So the code that asks whether a source is named, sized
// or sharded asks Caps or As, never a type assertion, and gets the same
// answer for a source and for any stack of wrappers of it.
//
// A Pool is a set of worker goroutines shared by every stream. A Loader is
// one stream: it plans batches with a sampler.Distributed, hands their
// samples to the pool in chunks, and delivers filled batches in order. Each
// batch lives in a pinned slot the Loader holds for its whole life, so the
// steady state allocates nothing. Output depends only on (seed, epoch,
// index), never on the number of workers or their scheduling. A pipeline
// ending with batch ops (augment's mixup, cutmix) has them run on each
// batch by the worker that writes its last chunk, before Next hands it
// out, drawn from (seed, epoch, rank, batch index); Batch.Mix records
// the draw. A Skipper
// applies the ErrorPolicy to a sample its source cannot read. A worker
// that faults reading a memory-mapped file that shrank under it (see
// RegisterMapping) makes that sample an ErrFault error, named through the
// source's Namer, instead of crashing the process.
//
// Open, RegisterFormat, Sources, Pools, Skippers and Loader.Release are
// safe for concurrent use; Loader.Next must be called from one goroutine
// at a time. Caps and As are, and a Wrapper, which does not change after
// Wrap, is safe for concurrent use as the source it wraps is.
package loader
