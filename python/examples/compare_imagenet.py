#!/usr/bin/python3
"""The ImageNet training input in PyTorch, no model: torchvision's
DataLoader with RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(),
Normalize(ImageNet) on PIL images, num_workers 0, 1 and 2, reading the
large-image tar (loader/internal/loadertest.LargeImagesTar, made by
scripts/make-large-images.py into ~/.cache/loaderd/large-images-v1.tar).

    /usr/bin/python3 python/examples/compare_imagenet.py [--tar PATH] [--images N]

Prints images/s in the steady state (after the first batch, so worker
start-up is excluded), batches of 64, the median of --repeats runs. The
loaderd side of the comparison is the Go benchmark on the same tar:

    go test -run XXX -bench ImageNetPipeline ./loader/format/tar
"""

import argparse
import io
import os
import statistics
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tar", default=os.path.expanduser("~/.cache/loaderd/large-images-v1.tar"))
    ap.add_argument("--images", type=int, default=640)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ds = TarImages(a.tar)
    print(f"{len(ds)} images in {a.tar}; torch {torch.__version__}")
    print("| DataLoader num_workers | images/s |")
    print("|---|---|")
    for w in (0, 1, 2):
        r = statistics.median(rate(ds, w, a.images, a.batch) for _ in range(a.repeats))
        print(f"| {w} | {r:.0f} |", flush=True)


if __name__ == "__main__":
    main()
