// Package nn implements neural-network layers with forward and backward
// passes on a tensor.Device: Linear, Conv2d (im2col + GEMM), ReLU,
// MaxPool2d, BatchNorm2d (train/eval, PyTorch running statistics, optional
// cross-replica SyncBN), Flatten, GlobalAvgPool, Sequential and Residual
// composition, softmax cross-entropy with label smoothing, the MLP and
// ResNet-style CNN models for 32×32×3 input, and a checkpoint format.
//
// A Model owns its parameters in two flat device buffers (weights and their
// gradients) plus one for running statistics, so an optimizer step, a
// gradient all-reduce or a broadcast is one kernel or one collective over
// one buffer. Backward overwrites every gradient; there is no ZeroGrad.
// Activations are NCHW; a Linear layer takes N×F×1×1 (use Flatten).
//
// Concurrency: a Model, its modules and its loss belong to one device and
// must be used by one goroutine at a time. Independent models may run
// concurrently. Initialisation is deterministic given the seed, whatever the
// device, so replicas built with the same seed start identical.
package nn
