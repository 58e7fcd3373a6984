#!/usr/bin/python3
"""Input pipelines side by side, no model: PyTorch's DataLoader with the
classic CIFAR transforms (num_workers 0, 1, 2) against loaderd's client, on
the same 50,000 CIFAR-10 training images.

    /usr/bin/python3 python/examples/compare.py [--png compare.png] [--json out.json]

It decodes ../shared/data/cifar10-train-jpg.tar once into CIFAR-10 binary
files (what the daemon's cifar: format and the in-memory DataLoader read)
and extracts it for ImageFolder, under --workdir; builds and starts loaderd
on a Unix socket (or uses --address); then measures each pipeline's steady
state: images per second after its first batch (worker start-up and the
first fill excluded for everyone), the median of --repeats runs. Prints a
Markdown table and draws a bar chart.

--baseline DIR measures the loaderd rows a second time, in a subprocess
whose loaderd package comes from DIR (e.g. an older client's python/
directory), against the same daemon in the same run: a before/after of the
client on one machine at one time.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torchvision

import common
import loaderd


def rate(batches, images):
    """Images/s over `images` images after the first batch of an iterator."""
    it = iter(batches)
    next(it)
    n, t0 = 0, time.perf_counter()
    for x, y in it:
        n += len(y)
        if n >= images:
            break
    return n / (time.perf_counter() - t0)


def dataloader_rows(args, bindir, jpgdir):
    rows = []
    sources = [("CIFAR arrays in memory", lambda: common.CIFARArrays(bindir, common.classic_transform()))]
    if jpgdir is not None:
        sources.append(("JPEG folder (ImageFolder)",
                        lambda: torchvision.datasets.ImageFolder(str(jpgdir), common.classic_transform())))
    for source, make in sources:
        ds = make()
        for w in args.workers:
            rates = []
            for _ in range(args.repeats):
                dl = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=w)
                rates.append(rate(dl, args.dl_images))
            rows.append(dict(pipeline="DataLoader", source=source, workers=f"num_workers={w}",
                             rate=common.median(rates)))
            print(f"  {rows[-1]}", flush=True)
    return rows


def loaderd_rows(args, address, datasets, client=""):
    rows = []
    for label, name, transport in datasets:
        rates = []
        ds = loaderd.Dataset(address, name, args.batch, seed=1, augment=common.SPEC, transport=transport)
        n = args.loaderd_epochs * ds.info().size
        for r in range(args.repeats):
            ds.set_epoch(r * (args.loaderd_epochs + 1))

            def epochs():
                for _ in range(args.loaderd_epochs + 1):
                    yield from ds

            rates.append(rate(epochs(), n))
        ds.close()
        rows.append(dict(pipeline=f"loaderd ({transport}){client}", source=label,
                         workers=f"{args.daemon_workers} daemon workers", rate=common.median(rates)))
        print(f"  {rows[-1]}", flush=True)
    return rows


def baseline_rows(args, address, streams):
    """The loaderd rows measured by the client in args.baseline (a
    subprocess: two loaderd packages cannot share one process)."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(args.baseline))
    cmd = [sys.executable, os.path.abspath(__file__), "--loaderd-only", "--address", address,
           "--batch", str(args.batch), "--loaderd-epochs", str(args.loaderd_epochs), "--repeats", str(args.repeats),
           "--daemon-workers", str(args.daemon_workers), "--streams", json.dumps(streams)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    for r in rows:
        r["pipeline"] += ", baseline client"
        print(f"  {r}", flush=True)
    return rows


def table(rows):
    best = max(r["rate"] for r in rows if r["pipeline"] == "DataLoader")
    lines = ["| pipeline | source | workers | images/s | × best DataLoader |", "|---|---|---|---:|---:|"]
    for r in rows:
        r["speedup"] = r["rate"] / best
        lines.append(f"| {r['pipeline']} | {r['source']} | {r['workers']} | {r['rate']:,.0f} | {r['speedup']:.1f}× |")
    return "\n".join(lines), best


def chart(rows, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is missing (scripts/python-setup.sh installs it); no chart at {path}")
        return
    labels = [f"{r['pipeline']}\n{r['source']}, {r['workers']}" for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.5))
    colors = ["#8c8c8c" if r["pipeline"] == "DataLoader" else "#1f77b4" for r in rows]
    ax.barh(range(len(rows)), [r["rate"] for r in rows], color=colors)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("images/s (log scale), batch 256, crop+flip+normalize to f32 CHW")
    for i, r in enumerate(rows):
        ax.text(r["rate"] * 1.05, i, f"{r['rate']:,.0f} ({r['speedup']:.1f}×)", va="center", fontsize=8)
    ax.set_xlim(right=max(r["rate"] for r in rows) * 4)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tar", default=str(common.DEFAULT_TAR))
    ap.add_argument("--workdir", default=None, help="data and daemon files (default $TMPDIR/loaderd-compare)")
    ap.add_argument("--address", help="use this running daemon (datasets c10=cifar:..., jpg=tar:...)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--workers", default="0,1,2", help="DataLoader num_workers to try")
    ap.add_argument("--daemon-workers", type=int, default=2)
    ap.add_argument("--dl-images", type=int, default=12800, help="images timed per DataLoader run")
    ap.add_argument("--loaderd-epochs", type=int, default=3, help="epochs timed per loaderd run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-jpeg", action="store_true", help="skip the JPEG rows")
    ap.add_argument("--png", default="compare.png")
    ap.add_argument("--json")
    ap.add_argument("--baseline", help="also measure the loaderd rows with the loaderd package in this directory")
    ap.add_argument("--loaderd-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--streams", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.loaderd_only:  # the --baseline subprocess
        print(f"baseline client: {loaderd.__file__}", file=sys.stderr)
        print(json.dumps(loaderd_rows(args, args.address, [tuple(s) for s in json.loads(args.streams)])))
        return
    args.workers = [int(w) for w in args.workers.split(",")]
    workdir = args.workdir or common.default_workdir("loaderd-compare")
    os.makedirs(workdir, exist_ok=True)

    print(f"preparing data under {workdir}", flush=True)
    bindir, jpgdir = common.prepare(workdir, args.tar, folder=not args.no_jpeg)
    datasets = {"c10": f"cifar:{bindir}"}
    streams = [("CIFAR binary (same images)", "c10", "shm"), ("CIFAR binary (same images)", "c10", "inline")]
    if not args.no_jpeg:
        datasets["jpg"] = f"tar:{args.tar}"
        streams.append(("JPEG tar (decoded in the daemon)", "jpg", "shm"))

    print("DataLoader (classic transforms):", flush=True)
    rows = dataloader_rows(args, bindir, jpgdir)
    print("loaderd:", flush=True)
    def measure(address):
        out = []
        for s in streams:  # per stream: the baseline client, then this one
            if args.baseline:
                out += baseline_rows(args, address, [s])
            out += loaderd_rows(args, address, [s])
        return out

    if args.address:
        rows += measure(args.address)
    else:
        with common.daemon(workdir, datasets, workers=args.daemon_workers) as d:
            rows += measure(d.address)

    text, best = table(rows)
    print()
    print(text)
    ld = max(r["rate"] for r in rows if r["pipeline"] == "loaderd (shm)")
    print(f"\nloaderd (shm) / best DataLoader: {ld / best:.1f}×  ({os.cpu_count()} CPUs, torch {torch.__version__})")
    base = [r["rate"] for r in rows if r["pipeline"] == "loaderd (shm), baseline client"]
    if base:
        print(f"loaderd (shm), baseline client / best DataLoader: {max(base) / best:.1f}×; "
              f"this client / baseline: {ld / max(base):.2f}")
    chart(rows, args.png, f"CIFAR-10 train, {os.cpu_count()} CPUs: loaderd client vs DataLoader")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(rows=rows, cpus=os.cpu_count(), torch=torch.__version__, batch=args.batch), f, indent=1)


if __name__ == "__main__":
    main()
