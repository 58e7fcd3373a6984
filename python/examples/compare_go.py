#!/usr/bin/python3
"""The Python client against the Go client, same daemon, same stream:
what the PyTorch user gives up by reading batches from Python.

    /usr/bin/python3 python/examples/compare_go.py [--trainer BIN] [--loaderd BIN] [--transport shm] [--grpc-too]

One loaderd (2 workers, the classic CIFAR recipe to float32, batch 256)
serves the CIFAR-10 training images as CIFAR binary files, decoded from
../shared/data/cifar10-train-jpg.tar under --workdir as compare.py does.
In turns, --repeats times: `trainer consume` (the Go client, a process of
its own) reads --epochs epochs, then this process reads the same epochs
through loaderd.Dataset. Both rates count every image from the stream's
open to its end, as `trainer consume` reports them, and the medians and
their ratio are printed, with each round's ratio and their median, and
the CPU each client's process spends per batch (every thread of it). The
turns share one machine at one time, so a VM whose speed drifts moves both.

Both clients get the same window of unacknowledged batches (--window, the
Go client's default of 8; the Python client's prefetch is the window less
its held batch and the one a loop variable keeps). Over shared memory the
Python client takes its batches over the lane (ShmRegion.lane); with
--grpc-too a third turn reads them from gRPC messages as before the lane
(LOADERD_SHM_LANE=0), for the difference in the same run.
"""

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import common  # noqa: E402
from common import loaderd  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def trainer_binary(workdir, given):
    if given:
        return given
    out = pathlib.Path(workdir) / "trainer"
    env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/local/go/bin", GOWORK="off")
    subprocess.run(["go", "build", "-o", str(out), "."], cwd=ROOT / "cmd" / "trainer", env=env, check=True)
    return str(out)


def go_rate(args, trainer, address):
    """(images/s, µs of the process's CPU per batch) of `trainer consume`."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([trainer, "consume", "--addr", address, "--dataset", "c10", "--batch", str(args.batch),
                          "--epochs", str(args.epochs), "--seed", "1", "--transport", args.transport,
                          "--prefetch", str(args.window), "--json"],
                         capture_output=True, text=True, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    st = json.loads(out.stdout.strip().splitlines()[-1])
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return st["images_per_s"], 1e6 * cpu / st["batches"]


def python_rate(args, address, lane=True):
    """(images/s, µs of this process's CPU per batch, every thread's) of
    the Python client."""
    os.environ["LOADERD_SHM_LANE"] = "1" if lane else "0"
    ds = loaderd.Dataset(address, "c10", args.batch, seed=1, epochs=args.epochs, transport=args.transport,
                         prefetch=args.window - 2, hold=1)
    n, batches, t0, c0 = 0, 0, time.perf_counter(), time.process_time()
    # The first iter() opens the stream: timed from there, as the Go
    # client's rate is. Each iter() is one epoch, and the Go client reads
    # --epochs of them: so does this loop (one epoch alone would charge
    # the stream's open four times as heavily here).
    for _ in range(args.epochs):
        for _, y in ds:
            n += len(y)
            batches += 1
    rate, cpu = n / (time.perf_counter() - t0), time.process_time() - c0
    ds.close()
    return rate, 1e6 * cpu / batches


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tar", default=str(common.DEFAULT_TAR))
    ap.add_argument("--workdir", default=None, help="data and binaries (default $TMPDIR/loaderd-compare)")
    ap.add_argument("--loaderd", help="daemon binary (default $LOADERD_BIN, else built)")
    ap.add_argument("--trainer", help="trainer binary (default built from cmd/trainer)")
    ap.add_argument("--transport", default="shm", choices=["shm", "inline"])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=4, help="epochs per timed run")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--window", type=int, default=8, help="unacknowledged batches, both clients (default 8)")
    ap.add_argument("--grpc-too", action="store_true", help="also time the Python client without the lane")
    ap.add_argument("--json")
    args = ap.parse_args()
    workdir = args.workdir or common.default_workdir("loaderd-compare")
    bindir, _ = common.prepare(workdir, args.tar)
    trainer = trainer_binary(workdir, args.trainer)
    if args.window < 3:
        ap.error("--window must be at least 3")
    go, py, old = [], [], []  # (images/s, client CPU µs per batch) per round
    with common.daemon(workdir, {"c10": f"cifar:{bindir}"}, binary=args.loaderd) as d:
        python_rate(args, d.address)  # warm: page cache, the daemon's first fill
        for r in range(args.repeats):
            go.append(go_rate(args, trainer, d.address))
            py.append(python_rate(args, d.address))
            (g1, _), (p1, _) = go[-1], py[-1]
            line = f"  round {r + 1}: Go {g1:,.0f} images/s, Python {p1:,.0f} ({p1 / g1:.2f})"
            if args.grpc_too:
                old.append(python_rate(args, d.address, lane=False))
                line += f", Python without the lane {old[-1][0]:,.0f} ({old[-1][0] / g1:.2f})"
            print(line, flush=True)
    cpu = {k: statistics.median(c for _, c in v) for k, v in (("go", go), ("py", py), ("old", old)) if v}
    go, py, old = [r for r, _ in go], [r for r, _ in py], [r for r, _ in old]
    g, p = statistics.median(go), statistics.median(py)
    per_round = statistics.median(b / a for a, b in zip(go, py))
    print(f"\n{args.transport}, batch {args.batch}, window {args.window}, {args.epochs} epochs a run, medians of "
          f"{args.repeats}: Go client {g:,.0f} images/s, Python client {p:,.0f} images/s; Python / Go = {p / g:.2f} "
          f"(median of the rounds' ratios {per_round:.2f}; {os.cpu_count()} CPUs)")
    print(f"client CPU per batch (its process, every thread; medians): Go {cpu['go']:.0f} µs, "
          f"Python {cpu['py']:.0f} µs" + (f", Python without the lane {cpu['old']:.0f} µs" if old else ""))
    if old:
        o = statistics.median(old)
        print(f"without the lane: Python client {o:,.0f} images/s; Python / Go = {o / g:.2f} "
              f"(median of the rounds' ratios {statistics.median(b / a for a, b in zip(go, old)):.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(go=go, python=py, python_grpc=old, ratio=p / g, round_ratio=per_round, cpu_us_per_batch=cpu,
                           transport=args.transport, batch=args.batch, window=args.window), f, indent=1)


if __name__ == "__main__":
    main()
