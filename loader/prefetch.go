package loader

import "github.com/loaderd/loaderd/sampler"

// ShardOrderer is implemented by sources read as shards that were asked
// for a shard-shuffle order (a dataset option such as tar's
// order=shards:W): New uses it as the sampler's Distributed.Shards when
// the stream shuffles. A nil result keeps the uniform order.
type ShardOrderer interface {
	ShardOrder() *sampler.Shards
}

// Prefetcher is implemented by sources that fetch data ahead (remote
// shards): the Loader calls Prefetch with each batch's indices when it
// plans the batch, InFlight batches before workers read them. Prefetch
// must return at once (it runs under the stream's lock) and must not
// keep indices, which the Loader reuses.
type Prefetcher interface {
	Prefetch(indices []int64)
}
