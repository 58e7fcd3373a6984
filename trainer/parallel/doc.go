// Package parallel implements data-parallel training over several devices:
// collectives (all-reduce, reduce, broadcast) behind a Collective interface
// that NCCL can implement later, a host-memory implementation for CPU (or
// any) devices, DataParallel (one process drives K devices: scatter the
// batch, forward and backward concurrently, reduce gradients to device 0,
// step once there, broadcast) and the DDP building block Rank (each rank
// has its own data, gradients are all-reduced and every rank steps its own
// optimizer).
//
// BatchNorm: with Config.SyncBN the BatchNorm layers normalise with
// statistics of the global batch (sums all-reduced across replicas, like
// torch.nn.SyncBatchNorm), so K devices compute what one device computes on
// the whole batch, up to float rounding, and running statistics stay
// identical everywhere. Without it, each replica uses its own slice's
// statistics, as PyTorch DataParallel/DDP do by default, and the running
// statistics of replica 0 are broadcast to the others (DataParallel after
// each step, DDP before each forward, like broadcast_buffers=True).
//
// Gradient scaling: DataParallel scales each replica's loss gradient by
// 1/N_global and sums, which is exact for unequal slices; DDP uses the mean
// over each rank's slice and averages, exact when ranks hold equal counts
// (as the distributed sampler guarantees).
//
// Concurrency: the collectives of a group are called concurrently, one
// goroutine per rank, in the same order on every rank. A DataParallel is
// used by one goroutine; each Rank by its own goroutine.
package parallel
