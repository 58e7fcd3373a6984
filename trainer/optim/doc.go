// Package optim implements SGD with momentum, dampening, weight decay and
// Nesterov momentum with exactly torch.optim.SGD's update rule, applied as
// one device kernel over a model's flat parameter buffer, and learning-rate
// schedules: linear warm-up followed by cosine decay, and PyTorch's
// OneCycleLR (with its momentum cycle).
//
// Concurrency: an SGD belongs to one device and must be used by one
// goroutine at a time. Schedules are immutable values, safe to share.
package optim
