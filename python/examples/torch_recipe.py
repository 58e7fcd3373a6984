#!/usr/bin/env python3
"""The Go trainer's CIFAR-10 recipe in PyTorch, on the same loaderd stream:
the reference that says whether an accuracy the Go trainer reaches is the
data's limit or the trainer's. ResNet-18 (32x32 stem, as gpu_compare.py),
batch 512, SGD with Nesterov momentum, weight decay 5e-4 on every
parameter, OneCycleLR (PyTorch's defaults: 30% warm-up, momentum cycled
0.85-0.95), cross-entropy with label smoothing 0.1, bf16 autocast and
channels_last; trained on the daemon's "train" dataset with its default
augmentation and evaluated after every epoch on "val" (no crop or flip).

    python3 python/examples/torch_recipe.py --address unix:///run/loaderd.sock --epochs 30

Prints one line per epoch and "90% validation accuracy reached at N s"
(training plus evaluation time), as scripts/gpu-check.sh's cifar step does
for the Go trainer.
"""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401 - finds the checkout's loaderd package
import loaderd  # noqa: E402
from gpu_compare import resnet18_cifar  # noqa: E402


def evaluate(model, val, fmt):
    model.eval()
    right = total = 0
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for x, y in val:
            x = x.cuda(non_blocking=True).contiguous(memory_format=fmt)
            y = y.cuda(non_blocking=True)
            right += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return right / total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--address", required=True)
    ap.add_argument("--train", default="train")
    ap.add_argument("--val", default="val")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--lr", type=float, default=0.4)
    ap.add_argument("--wd", type=float, default=5e-4)
    ap.add_argument("--smoothing", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.backends.cudnn.benchmark = True
    fmt = torch.channels_last
    model = resnet18_cifar().cuda().to(memory_format=fmt)
    train = loaderd.Dataset(a.address, a.train, a.batch, seed=a.seed, transport="shm", pin=True, drop_last=True)
    val = loaderd.Dataset.eval(a.address, a.val, 500, transport="shm", pin=True)
    steps = len(train)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, nesterov=True, weight_decay=a.wd)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=a.epochs * steps)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=a.smoothing)
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}, {steps} steps an epoch, {a.epochs} epochs, lr {a.lr}")
    t, reached = 0.0, None
    for epoch in range(a.epochs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        train.set_epoch(epoch)
        right = seen = 0
        for x, y in train:
            x = x.cuda(non_blocking=True).contiguous(memory_format=fmt)
            y = y.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(x)
                loss = loss_fn(out, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            right += (out.argmax(1) == y).sum()
            seen += len(y)
        acc = evaluate(model, val, fmt)
        torch.cuda.synchronize()
        t += time.perf_counter() - t0
        print(f"epoch {epoch + 1}: train acc {100 * right.item() / seen:.2f}% | val acc {100 * acc:.2f}%  (t = {t:.1f} s)", flush=True)
        if reached is None and acc >= 0.90:
            reached = t
    print("90% validation accuracy reached at " + (f"{reached:.1f} s" if reached is not None else "-- not reached"))
    train.close()
    val.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
