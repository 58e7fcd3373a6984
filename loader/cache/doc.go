// Package cache implements a decoded-sample cache shared by every stream
// of a dataset: the first stream that needs a sample decodes it, and every
// stream after it — any seed, rank, augmentation or output type — reads
// the same u8 pixels from memory instead of decoding again.
//
// A Cache wraps a loader.Source and is one itself, so the loader, the
// error policy and the fault guard see nothing new. It embeds a
// loader.Wrapper: it has exactly its source's capabilities (loader.Caps;
// a cache of a source that is no Namer is no Namer, one of fixed-size
// images no SizedSource), and passes names, shard order, prefetch and the
// decoder's name through. The dataset option
// cache=decoded (with cache_bytes=SIZE) is taken out of FORMAT:PATH?OPTIONS
// by Open and SplitSpec, before loader.Open sees the format's options.
//
// # Policy: static admission
//
// A sampler that shuffles draws every epoch as a fresh uniform permutation,
// so when the cache holds C of N samples, each uncached sample is as likely
// to be read next as any cached one: no eviction can raise the hit rate
// above C/N, and keeping whatever was admitted first reaches it. LRU does
// worse: what a stream just read is what it will not read again this
// epoch, so it evicts its own future hits (TestPolicyHitRates measures
// both under four streams' real access pattern). So the cache admits
// samples while the arena has room and then stops; it never evicts.
//
// That makes storage a bump allocator in one arena. An entry, once
// written, never moves and is never overwritten, so a hit returns a view
// of the arena with no copy and no lock: the loader.Source contract
// (pixels valid until the worker's next call) holds for ever after. Each
// entry's state is one atomic word: empty, being filled, or ready at an
// offset. A worker that misses decodes into its own scratch first, then
// claims the entry (empty → filling), copies, writes the label and size,
// and publishes the offset with an atomic store: a reader that sees the
// offset sees the bytes. A worker that finds the entry being filled by
// another does not wait; it has decoded the sample itself. Errors are
// never cached: the stream's error policy sees each one as without the
// cache. Neither the hit nor the miss path allocates.
//
// Images of varying size (a loader.SizedSource) are cached at their full
// size (DCT scale 1), each entry as long as its image. A stream whose
// pipeline asks for a scaled decode (loader.Want) of a cached image
// reads it from the source at that scale, as it would without the cache,
// so its pixels are the same; the cache only ever serves what the source
// would have returned.
//
// The arena is an anonymous memory mapping outside the Go heap (the
// collector neither scans it nor counts it toward its pacing), faulted in
// as entries are written, with transparent huge pages where the kernel
// offers them. Close makes it inaccessible and gives its memory back, but
// keeps the addresses reserved and registered with loader.RegisterMapping:
// a worker that still reads a view after Close (a misuse) gets
// loader.ErrFault for that sample, never another allocation's bytes.
//
// A Cache is safe for concurrent use by any number of workers.
package cache
