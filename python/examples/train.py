#!/usr/bin/python3
"""One training loop, two inputs: loaderd's client or PyTorch's DataLoader
with the classic transforms, on the same CIFAR-10 images.

    # loaderd: start a daemon (or let --start-daemon do it), then
    /usr/bin/python3 python/examples/train.py --input loaderd --address unix:///run/loaderd.sock --dataset cifar10
    # the same loop fed by DataLoader from the CIFAR-10 binary directory
    /usr/bin/python3 python/examples/train.py --input dataloader --data DIR --num-workers 2
    # self-contained: decode the JPEG tar once, start a daemon, train briefly
    /usr/bin/python3 python/examples/train.py --input loaderd --start-daemon --max-steps 20 --model cnn

Multi-process DDP: torchrun --nproc-per-node 2 python/examples/train.py ...
(loaderd.Dataset takes its rank and world size from torch.distributed).
--checkpoint PATH saves model, optimiser and the input's position every
--save-every steps and resumes from it: with loaderd the run continues at
the next batch of the same epoch; with DataLoader, at the next epoch.

The loop reports images/s and the share of the time spent waiting for the
next batch: the number that says whether the input keeps the model fed.
"""

import argparse
import contextlib
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torchvision

import common
import loaderd  # common found it: installed, or the checkout's


def make_model(name):
    if name == "resnet18":
        # ResNet-18 for 32x32 inputs: 3x3 stem, no max-pool (as in most CIFAR recipes).
        m = torchvision.models.resnet18(num_classes=10)
        m.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        m.maxpool = nn.Identity()
        return m
    # A small CNN that trains at a few thousand images/s on a CPU.
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(128, 10))


class LoaderdInput:
    """Batches from the daemon: views on its shared memory, pinned for CUDA."""

    def __init__(self, args, cuda):
        self.ds = loaderd.Dataset(args.address, args.dataset, args.batch, seed=args.seed, epochs=args.epochs,
                                  augment=common.SPEC, transport=args.transport, pin=cuda)

    def epoch(self, e):
        # After load_state_dict, set_epoch keeps the mid-epoch resume point
        # of that same epoch.
        self.ds.set_epoch(e)
        return self.ds

    def state_dict(self):
        return self.ds.state_dict()

    def load_state_dict(self, s):
        self.ds.load_state_dict(s)

    def start_epoch(self):
        return self.ds.epoch


class DataLoaderInput:
    """The classic pipeline: per-sample PIL transforms in worker processes."""

    def __init__(self, args, cuda):
        data = common.CIFARArrays(args.data, common.classic_transform())
        self.sampler = torch.utils.data.DistributedSampler(data, seed=args.seed) if dist.is_initialized() else None
        self.dl = torch.utils.data.DataLoader(
            data, batch_size=args.batch, shuffle=self.sampler is None, sampler=self.sampler,
            num_workers=args.num_workers, pin_memory=cuda, persistent_workers=args.num_workers > 0)
        self.next_epoch = 0

    def epoch(self, e):
        if self.sampler is not None:
            self.sampler.set_epoch(e)
        self.next_epoch = e + 1
        return self.dl

    def state_dict(self):
        return {"epoch": self.next_epoch}  # DataLoader resumes only at epoch boundaries

    def load_state_dict(self, s):
        self.next_epoch = s["epoch"]

    def start_epoch(self):
        return self.next_epoch


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", choices=["loaderd", "dataloader"], default="loaderd")
    ap.add_argument("--address", default="unix:///run/loaderd.sock")
    ap.add_argument("--dataset", default="cifar10")
    ap.add_argument("--transport", choices=["shm", "inline"], default="shm")
    ap.add_argument("--data", help="CIFAR-10 binary directory (DataLoader input)")
    ap.add_argument("--start-daemon", action="store_true",
                    help="decode the JPEG tar under --workdir and serve it as 'cifar10' for this run")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--model", choices=["resnet18", "cnn"], default="resnet18")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: all epochs)")
    ap.add_argument("--checkpoint")
    ap.add_argument("--save-every", type=int, default=100)
    args = ap.parse_args()

    cuda = torch.cuda.is_available()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group("nccl" if cuda else "gloo")
    local = loaderd.local_rank()
    device = torch.device(f"cuda:{local}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    rank0 = not dist.is_initialized() or dist.get_rank() == 0

    with contextlib.ExitStack() as stack:
        if args.start_daemon or (args.input == "dataloader" and not args.data):
            workdir = args.workdir or common.default_workdir("loaderd-train")
            bindir, _ = common.prepare(workdir)
            args.data = args.data or str(bindir)
            if args.start_daemon and args.input == "loaderd":
                args.address = stack.enter_context(common.daemon(workdir, {args.dataset: f"cifar:{bindir}"})).address
        train(args, device, cuda, rank0)
    if dist.is_initialized():
        dist.destroy_process_group()


def train(args, device, cuda, rank0):
    torch.manual_seed(args.seed)
    # channels_last suits tensor cores; on a CPU it is slower here.
    fmt = torch.channels_last if cuda else torch.contiguous_format
    model = make_model(args.model).to(device, memory_format=fmt)
    if dist.is_initialized():
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
    inp = LoaderdInput(args, cuda) if args.input == "loaderd" else DataLoaderInput(args, cuda)
    scaler = torch.cuda.amp.GradScaler(enabled=cuda)
    step = 0
    if args.checkpoint and os.path.exists(args.checkpoint):
        ck = torch.load(args.checkpoint, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        inp.load_state_dict(ck["input"])
        step = ck["step"]
        if rank0:
            print(f"resumed at step {step}, input position {ck['input']}")

    def save():
        if args.checkpoint and rank0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "input": inp.state_dict(),
                        "step": step}, args.checkpoint + ".tmp")
            os.replace(args.checkpoint + ".tmp", args.checkpoint)

    model.train()
    for epoch in range(inp.start_epoch(), args.epochs):
        wait = 0.0
        seen, correct, loss_sum = 0, 0, 0.0
        t_epoch = t = time.perf_counter()
        for images, labels in inp.epoch(epoch):
            t_got = time.perf_counter()
            wait += t_got - t
            # With loaderd and pin=True the copy is DMA from the daemon's
            # shared memory; the client acknowledges the batch once the copy
            # is done, so non_blocking is safe.
            x = images.to(device, non_blocking=True, memory_format=fmt)
            y = labels.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.float16 if cuda else torch.bfloat16, enabled=cuda):
                out = model(x)
                loss = F.cross_entropy(out, y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            step += 1
            seen += len(y)
            correct += (out.argmax(1) == y).sum().item()  # also syncs the device each step
            loss_sum += loss.item() * len(y)
            if args.checkpoint and step % args.save_every == 0:
                save()
            t = time.perf_counter()
            if args.max_steps and step >= args.max_steps:
                break
        elapsed = time.perf_counter() - t_epoch
        if rank0 and seen:
            print(f"epoch {epoch}: {seen} images, loss {loss_sum / seen:.3f}, acc {correct / seen:.3f}, "
                  f"{seen / elapsed:,.0f} images/s, waiting for data {100 * wait / max(elapsed, 1e-9):.1f}% "
                  f"({args.input}, {args.model}, {device})", flush=True)
        if args.max_steps and step >= args.max_steps:
            break
    save()


if __name__ == "__main__":
    main()
