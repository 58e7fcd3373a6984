#!/usr/bin/env python3
"""One model, three ways of feeding it, in one run on one GPU: torchvision's
ResNet-18 adapted to 32x32 (3x3 stem, no max-pool), batch 512, bf16
autocast, channels_last, SGD, trained on CIFAR-10 with the classic
augmentation (RandomCrop(32, 4), flip, normalise), fed by

  * the model alone: one batch resident on the device (the ceiling),
  * loaderd's Python client (transport shm, pin=True, non_blocking copies),
  * torch DataLoader (pin_memory=True) with num_workers 0, 2, 4, 8, 16,

reporting images/s, the share of wall time the training loop spends
waiting for the next batch (host wait), the share the GPU sits idle between
steps (CUDA events at each step's start and end: the GPU-side cost of
waiting, which a host wait hides when the GPU's queue still holds work),
and GPU utilisation (NVML sampled every 50 ms while the timed steps run).
issue 14 item 9; scripts/gpu-check.sh runs it on a GPU machine.

    python3 python/examples/gpu_compare.py [--device cuda] [--tar TAR] [--json out.json]

--tiny is a smoke test on any machine (CPU included): a few images, batch
8, two timed steps, workers 0 and 1. Its numbers mean nothing.
"""

import argparse
import json
import os
import sys
import threading
import time

import torch
import torchvision

import common
import loaderd


def resnet18_cifar():
    """ResNet-18 with the CIFAR stem: 3x3 stride-1 first conv, no max-pool."""
    m = torchvision.models.resnet18(num_classes=10)
    m.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    m.maxpool = torch.nn.Identity()
    return m


class UtilSampler:
    """GPU utilisation from NVML (pynvml / nvidia-ml-py), sampled on a thread
    between start() and stop(); mean percent, or None where NVML is missing."""

    def __init__(self, device):
        self.handle, self.samples = None, []
        if device.type != "cuda":
            return
        try:
            import pynvml
            pynvml.nvmlInit()
            index = device.index if device.index is not None else torch.cuda.current_device()
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            if visible:  # NVML counts all GPUs; CUDA only the visible ones
                index = int(visible.split(",")[index])
            self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as e:  # noqa: BLE001 - any NVML problem means no figure
            print(f"note: no NVML utilisation ({e}); using torch.cuda.utilization()", file=sys.stderr)
            self.handle = "torch"

    def _read(self):
        if self.handle == "torch":
            return torch.cuda.utilization()
        return self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu

    def start(self):
        self.samples, self._stop = [], threading.Event()
        if self.handle is None:
            return
        def loop():
            while not self._stop.wait(0.05):
                try:
                    self.samples.append(self._read())
                except Exception:  # noqa: BLE001
                    return
        self._t = threading.Thread(target=loop, daemon=True)
        self._t.start()

    def stop(self):
        if self.handle is None:
            return None
        self._stop.set()
        self._t.join()
        return sum(self.samples) / len(self.samples) if self.samples else None


def endless(make_iter):
    while True:
        yield from make_iter()


def measure(name, batches, args, device, util):
    """Trains args.warmup + args.steps steps on batches; times the last
    args.steps: images/s, data-wait share, mean GPU utilisation."""
    torch.manual_seed(0)
    model = resnet18_cifar().to(device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    amp = args.amp == "bf16"
    fmt = torch.channels_last if device.type == "cuda" else torch.contiguous_format
    it = iter(batches)
    wait = images = 0.0
    t_start = None
    losses = torch.zeros((), device=device)
    events = []  # (start, end) of each timed step on the GPU's stream
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
            util.start()
            wait, images, t_start = 0.0, 0, time.perf_counter()
        t0 = time.perf_counter()
        x, y = next(it)
        wait += time.perf_counter() - t0
        timed = device.type == "cuda" and step >= args.warmup
        if timed:
            events.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
            events[-1][0].record()
        x = x.to(device, non_blocking=True).contiguous(memory_format=fmt)
        y = y.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses += loss.detach()
        images += len(y)
        if timed:
            events[-1][1].record()
    if device.type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t_start
    gpu = util.stop()
    idle = gpu_idle(events, secs)
    row = dict(pipeline=name, images_per_s=images / secs, wait_share=wait / secs, gpu_idle_share=idle,
               gpu_util=gpu, mean_loss=float(losses) / (args.warmup + args.steps), seconds=secs)
    print(f"  {name}: {row['images_per_s']:.0f} images/s, host wait {100 * row['wait_share']:.1f}%, "
          f"GPU idle {pct(idle)}, GPU {'n/a' if gpu is None else f'{gpu:.0f}%'}", flush=True)
    return row


def gpu_idle(events, secs):
    """Share of secs the GPU spent between one step's end and the next
    one's start (it reaches a start event only once the host has queued
    it); None without CUDA events."""
    if len(events) < 2:
        return None
    gaps_ms = sum(end.elapsed_time(nxt) for (_, end), (nxt, _) in zip(events, events[1:]))
    return max(0.0, gaps_ms / 1000) / secs


def pct(share):
    return "n/a" if share is None else f"{100 * share:.1f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tar", default=str(common.DEFAULT_TAR))
    ap.add_argument("--workdir", default=None, help="decoded data and daemon log (default $TMPDIR/loaderd-gpu-compare)")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=60, help="timed steps per pipeline")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first (cudnn autotune, worker start)")
    ap.add_argument("--workers", default="0,2,4,8,16", help="DataLoader num_workers to try")
    ap.add_argument("--daemon-workers", type=int, default=None, help="loaderd workers (default: all cores)")
    ap.add_argument("--amp", choices=["bf16", "none"], default=None, help="autocast (default bf16 on cuda, none on cpu)")
    ap.add_argument("--limit", type=int, default=None, help="use only the first N images of the tar")
    ap.add_argument("--tiny", action="store_true", help="smoke test: 512 images, batch 8, 2 steps, workers 0,1")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.tiny:
        args.batch, args.steps, args.warmup, args.workers = 8, 2, 1, "0,1"
        args.limit = args.limit or 512
    device = torch.device(args.device)
    if args.amp is None:
        args.amp = "bf16" if device.type == "cuda" else "none"
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    workers = [int(w) for w in args.workers.split(",")]
    workdir = args.workdir or common.default_workdir("loaderd-gpu-compare")
    os.makedirs(workdir, exist_ok=True)
    pin = device.type == "cuda"

    print(f"preparing data under {workdir}", flush=True)
    bindir, _ = common.prepare(workdir, args.tar, limit=args.limit)
    arrays = common.CIFARArrays(bindir, common.classic_transform())
    if len(arrays) < args.batch:
        sys.exit(f"gpu_compare: {len(arrays)} images, fewer than a batch of {args.batch}")
    util = UtilSampler(device)
    rows = []
    print(f"{device} ({torch.cuda.get_device_name(device) if pin else os.cpu_count()} "
          f"{'' if pin else 'CPUs'}), batch {args.batch}, amp {args.amp}, torch {torch.__version__}", flush=True)

    x = torch.randn(args.batch, 3, 32, 32).pin_memory() if pin else torch.randn(args.batch, 3, 32, 32)
    y = torch.randint(0, 10, (args.batch,))
    rows.append(measure("model alone (one resident batch)", endless(lambda: [(x, y)]), args, device, util))

    with common.daemon(workdir, {"c10": f"cifar:{bindir}"}, workers=args.daemon_workers or os.cpu_count()) as d:
        ds = loaderd.Dataset(d.address, "c10", args.batch, seed=1, augment=common.SPEC, transport="shm", pin=pin,
                             drop_last=True)
        rows.append(measure(f"loaderd client (shm, pin={pin})", endless(lambda: ds), args, device, util))
        ds.close()

    for w in workers:
        dl = torch.utils.data.DataLoader(arrays, batch_size=args.batch, shuffle=True, drop_last=True,
                                         num_workers=w, pin_memory=pin, persistent_workers=w > 0)
        rows.append(measure(f"DataLoader (pin_memory={pin}, num_workers={w})", endless(lambda: dl), args, device, util))
        del dl

    print()
    print("| pipeline | images/s | host wait for data | GPU idle between steps | GPU utilisation |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        g = "n/a" if r["gpu_util"] is None else f"{r['gpu_util']:.0f}%"
        print(f"| {r['pipeline']} | {r['images_per_s']:.0f} | {100 * r['wait_share']:.1f}% | {pct(r['gpu_idle_share'])} | {g} |")
    best_dl = max(r["images_per_s"] for r in rows if r["pipeline"].startswith("DataLoader"))
    ld = next(r["images_per_s"] for r in rows if r["pipeline"].startswith("loaderd"))
    print(f"\nloaderd client / best DataLoader: {ld / best_dl:.2f}x; model alone: {rows[0]['images_per_s']:.0f} images/s"
          f"{' (tiny smoke run: not a measurement)' if args.tiny else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, device=str(device), batch=args.batch, amp=args.amp, torch=torch.__version__,
                           cpus=os.cpu_count(), tiny=args.tiny), f, indent=1)


if __name__ == "__main__":
    main()
