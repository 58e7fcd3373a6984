// Package sampler implements loaderd's index plan: which dataset indices
// each rank of a distributed job reads in each epoch, and in what order.
//
// Distributed follows PyTorch's DistributedSampler index arithmetic exactly:
// every rank gets NumSamples positions; without DropLast the epoch order is
// padded by wrapping around its start, with DropLast its tail is cut; rank r
// takes every World-th entry starting at r. Ranks are disjoint apart from
// the padding, and together they cover the epoch.
//
// The shuffled order is never materialised. Perm is a keyed Feistel
// bijection with cycle-walking that maps a position to an index in O(1)
// memory and tens of nanoseconds, so planning a billion-sample dataset
// costs nothing. The order of epoch e under seed s is NewPerm(N,
// EpochKey(s, e)): a pure function of (seed, epoch), shared by all ranks,
// so loaderd instances need no coordination. That order is not torch's
// randperm; only the arithmetic around it matches. Order Torch swaps in
// torch's own order (TorchRandperm, torch's Mersenne Twister and
// shuffle, seeded with seed+epoch as DistributedSampler seeds it), so
// that a rank's epoch is DistributedSampler's to the index; it costs an
// O(N) permutation per epoch.
//
// Weighted sampling with replacement (PyTorch's WeightedRandomSampler)
// replaces the order by a list of K draws: Distributed.Weights, an alias
// table (NewWeights), whose draw g of epoch e is a pure function of
// (seed, e, g), so that the list is padded, cut, split and resumed as an
// order is, each position computed directly.
//
// Batches are addressed by Position (epoch, batch). A Cursor walks batches
// across epoch boundaries from any Position, and resuming at a Position
// yields exactly the rest of the uninterrupted walk.
//
// Elastic resume: a world's position is a prefix of the epoch's order, so
// Distributed.Global turns it into (epoch, offset), which any world
// continues from with EpochFrom, splitting the rest of the epoch anew
// (Position.Offset; docs/RESUME.md defines it).
//
// Concurrency: Distributed, Epoch and Perm are immutable values and safe for
// concurrent use. A Cursor is not; give each stream its own.
package sampler
