// Package trainer is loaderd's reference trainer: a training loop fed by
// the daemon through package client (github.com/loaderd/loaderd/client),
// used exactly as any other Go program would use it. Go trainers that only
// need batches link client, not this package.
//
// Train runs a training loop fed by one stream (DataParallel over K
// devices) or by K streams, one per rank (DDP), with a live progress line,
// evaluation on a second dataset, and checkpoints that hold the
// parameters, the optimizer state and the loader position
// (client.Stream.Position), so a stopped run resumes exactly where it
// stopped. TrainResult reports, besides the loss and accuracy, how long
// the steps waited for data: the number that says whether loaderd keeps
// the devices fed.
//
// The sub-packages hold the training engine: tensor (devices and
// kernels, and PlanCPU, the CPU devices a run uses), nn (layers and
// models), optim (SGD and schedules), parallel (DataParallel and
// all-reduce) and devices (NVML discovery for `trainer devices`, with the
// CPU devices used where there is no GPU). Train itself runs on CPU
// devices and does not link NVML.
//
// Several Trains may run at once on one Client, with distinct checkpoint
// files.
package trainer
