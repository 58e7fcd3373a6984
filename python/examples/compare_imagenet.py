#!/usr/bin/python3
"""The ImageNet training input in PyTorch, no model: torchvision's
DataLoader with RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(),
Normalize(ImageNet) on PIL images, num_workers 0, 1 and 2, reading the
large-image tar (loader/internal/loadertest.LargeImagesTar, made by
scripts/make-large-images.py into ~/.cache/loaderd/large-images-v1.tar).

    /usr/bin/python3 python/examples/compare_imagenet.py [--tar PATH] [--images N] [--loaderd BIN]

Prints images/s in the steady state (after the first batch, so worker
start-up is excluded), batches of 64, the median of --repeats runs. With
--loaderd (a built cmd/loaderd), the same run also measures loaderd on
the same tar and transform (`loaderd bench`, workers 1 and 2, two
epochs), the repeats interleaved with the DataLoader's so both see the
same machine, and prints the ratio to the best DataLoader. The Go
benchmark measures loaderd's side alone:

    go test -run XXX -bench ImageNetPipeline ./loader/format/tar
"""

import argparse
import io
import os
import re
import statistics
import subprocess
import tarfile
import time

import torch
from PIL import Image
from torchvision import transforms


class TarImages(torch.utils.data.Dataset):
    """The tar's JPEG members, read by offset (each worker opens its own
    file handle), labelled by their directory."""

    def __init__(self, path):
        self.path = path
        with tarfile.open(path) as t:
            ms = [m for m in t.getmembers() if m.isfile() and m.name.lower().endswith((".jpg", ".jpeg"))]
        self.items = [(m.offset_data, m.size) for m in ms]
        classes = sorted({os.path.dirname(m.name) for m in ms})
        idx = {c: i for i, c in enumerate(classes)}
        self.labels = [idx[os.path.dirname(m.name)] for m in ms]
        self.f, self.pid = None, None
        self.tf = transforms.Compose([
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ])

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        if self.f is None or self.pid != os.getpid():
            # pread, and a descriptor per process: a forked worker must not
            # share a file offset with its parent.
            self.f, self.pid = os.open(self.path, os.O_RDONLY), os.getpid()
        off, size = self.items[i]
        img = Image.open(io.BytesIO(os.pread(self.f, size, off))).convert("RGB")
        return self.tf(img), self.labels[i]


def rate(ds, workers, images, batch):
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                         persistent_workers=False)
    it = iter(loader)
    next(it)
    n, t0 = 0, time.perf_counter()
    for x, _ in it:
        n += x.shape[0]
        if n >= images:
            break
    return n / (time.perf_counter() - t0)


AUGMENT = "random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw"


def loaderd_rate(binary, tar, workers, batch):
    """images/s of `loaderd bench` over two epochs of the tar."""
    out = subprocess.run([binary, "bench", "--source", f"tar:{tar}?size=any", "--augment", AUGMENT,
                          "--batch", str(batch), "--epochs", "2", "--workers", str(workers)],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"^total: .*: (\d+) images/s", out, re.M)
    if not m:
        raise SystemExit(f"loaderd bench printed no total:\n{out}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tar", default=os.path.expanduser("~/.cache/loaderd/large-images-v1.tar"))
    ap.add_argument("--images", type=int, default=640)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--loaderd", help="a built loaderd binary: measure it in the same run")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ds = TarImages(a.tar)
    print(f"{len(ds)} images in {a.tar}; torch {torch.__version__}")
    dl, ld = {w: [] for w in (0, 1, 2)}, {w: [] for w in (1, 2)}
    for _ in range(a.repeats):
        for w in dl:
            dl[w].append(rate(ds, w, a.images, a.batch))
        if a.loaderd:
            for w in ld:
                ld[w].append(loaderd_rate(a.loaderd, a.tar, w, a.batch))
    print("| input | workers | images/s |")
    print("|---|---|---|")
    for w, rs in dl.items():
        print(f"| DataLoader | {w} | {statistics.median(rs):.0f} |")
    if a.loaderd:
        for w, rs in ld.items():
            print(f"| loaderd | {w} | {statistics.median(rs):.0f} |")
        best_dl = max(statistics.median(rs) for rs in dl.values())
        best_ld = max(statistics.median(rs) for rs in ld.values())
        print(f"loaderd / best DataLoader: {best_ld / best_dl:.2f}x "
              f"(runs: DataLoader {[round(r) for r in dl[2]]} at 2 workers, loaderd {[round(r) for r in ld[2]]})")


if __name__ == "__main__":
    main()
