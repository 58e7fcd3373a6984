// Package amp implements the host-side pieces of mixed-precision training:
// GradScaler, PyTorch's dynamic loss scaling for fp16 (torch.amp.GradScaler,
// step for step), and Round, which rounds float32 values to bfloat16 or
// float16 and back, as a GPU's half-precision copies of weights and
// activations would hold them, so the CPU engine can emulate a mixed-
// precision step.
//
// A GradScaler is not safe for concurrent use; Round is a pure function.
package amp
