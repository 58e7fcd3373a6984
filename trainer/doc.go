// Package trainer implements the client side of loaderd: the Go stub
// wrapper trainers link. A Client connects to a daemon; a Stream receives
// one rank's batches in order into a small ring of pinned buffers the
// Stream owns (or, over shared memory, as views of the daemon's region),
// prefetches ahead of the caller, acknowledges each batch on Release, and
// reports how long the caller waited for data: the number that says
// whether loaderd keeps the devices fed. A stream that loses its daemon
// reconnects and resumes at the first batch it had not received.
//
// Train runs a training loop fed by one stream (DataParallel over K
// devices) or by K streams, one per rank (DDP), with a live progress line,
// evaluation on a second dataset, and checkpoints that hold the
// parameters, the optimizer state and the loader position, so a stopped
// run resumes exactly where it stopped.
//
// The sub-packages hold the training engine: tensor (devices and
// kernels), nn (layers and models), optim (SGD and schedules), parallel
// (DataParallel and all-reduce) and devices (NVML discovery, with CPU
// devices where there is no GPU).
//
// A Client is safe for concurrent use. A Stream's Next must be called from
// one goroutine at a time; Release may be called from any goroutine.
package trainer
