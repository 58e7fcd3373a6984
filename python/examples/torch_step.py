#!/usr/bin/env python3
"""PyTorch's step rate for the ResNet-18 (32x32 stem) that the Go trainer
steps in BenchmarkStep, batch 512 of random data resident on the GPU (no
loader): forward, cross-entropy, backward and an SGD step, timed with CUDA
events after a warm-up, cudnn.benchmark on. Modes:

  bf16-cl   bf16 autocast, channels_last (what gpu_compare.py trains)
  tf32      f32 tensors, NCHW, TF32 tensor cores for convs and GEMMs
  f32       f32 tensors, NCHW, TF32 off

    python3 python/examples/torch_step.py [--batch 512] [--steps 30] [--modes bf16-cl,tf32,f32]

Prints a table of images/s per mode; issue 30's ratio divides the Go
trainer's BenchmarkStep figure by the matching row.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_compare import resnet18_cifar  # noqa: E402


def rate(mode, batch, steps, warmup):
    torch.backends.cudnn.benchmark = True
    tf32 = mode != "f32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.manual_seed(0)
    fmt = torch.channels_last if mode == "bf16-cl" else torch.contiguous_format
    model = resnet18_cifar().cuda().to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    xs = [torch.randn(batch, 3, 32, 32, device="cuda").contiguous(memory_format=fmt) for _ in range(4)]
    ys = [torch.randint(0, 10, (batch,), device="cuda") for _ in range(4)]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(warmup + steps):
        if i == warmup:
            torch.cuda.synchronize()
            start.record()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16-cl"):
            loss = loss_fn(model(xs[i % 4]), ys[i % 4])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    end.record()
    torch.cuda.synchronize()
    return batch * steps / (start.elapsed_time(end) / 1e3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--modes", default="bf16-cl,tf32,f32")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_step: no CUDA device", file=sys.stderr)
        return 2
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, batch {a.batch}")
    print("| mode | images/s |")
    print("| --- | ---: |")
    for m in a.modes.split(","):
        print(f"| {m} | {rate(m, a.batch, a.steps, a.warmup):.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
