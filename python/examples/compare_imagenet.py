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

--recipe ta_wide is torchvision's stronger classification recipe on both
sides: RandomResizedCrop(224), RandomHorizontalFlip(), TrivialAugmentWide(),
PILToTensor(), ConvertImageDtype(float), Normalize(ImageNet),
RandomErasing(0.1) for the DataLoader, and for loaderd

    random_resized_crop=224,flip=0.5,trivial_augment_wide,normalize=imagenet,out=f32:chw,random_erasing=0.1

(random_erasing acts on the finished tensor, so it ends the chain, after
out=). Its loaderd rows are measured through the Python client (--via
client, the default for this recipe): a daemon with --loaderd-workers
workers (default 2) on a private Unix socket, batches over shared memory,
float32 NCHW tensors in the loop exactly as the DataLoader delivers them,
timed over the same --images after the first batch. --via bench measures
with `loaderd bench` instead (the default recipe's way).

    go build -o /tmp/loaderd ./cmd/loaderd &&
    /usr/bin/python3 python/examples/compare_imagenet.py --recipe ta_wide --loaderd /tmp/loaderd --images 2560
"""

import argparse
import contextlib
import io
import os
import re
import statistics
import subprocess
import tarfile
import tempfile
import time

import torch
from PIL import Image
import torchvision
from torchvision import transforms


MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def default_transform():
    """The ImageNet training transform: RandomResizedCrop(224),
    RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet)."""
    return transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(MEAN, STD),
    ])


def ta_wide_transform():
    """torchvision's TrivialAugmentWide recipe (references/classification,
    auto_augment="ta_wide", random_erase=0.1): float32 CHW out."""
    return transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.TrivialAugmentWide(),
        transforms.PILToTensor(),
        transforms.ConvertImageDtype(torch.float),
        transforms.Normalize(MEAN, STD),
        transforms.RandomErasing(0.1),
    ])


class TarImages(torch.utils.data.Dataset):
    """The tar's JPEG members, read by offset (each worker opens its own
    file handle), labelled by their directory."""

    def __init__(self, path, transform=None):
        self.path = path
        with tarfile.open(path) as t:
            ms = [m for m in t.getmembers() if m.isfile() and m.name.lower().endswith((".jpg", ".jpeg"))]
        self.items = [(m.offset_data, m.size) for m in ms]
        classes = sorted({os.path.dirname(m.name) for m in ms})
        idx = {c: i for i, c in enumerate(classes)}
        self.labels = [idx[os.path.dirname(m.name)] for m in ms]
        self.f, self.pid = None, None
        self.tf = transform if transform is not None else default_transform()

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
TA_WIDE = "random_resized_crop=224,flip=0.5,trivial_augment_wide,normalize=imagenet,out=f32:chw,random_erasing=0.1"

# recipe: (DataLoader transform, loaderd augment, how loaderd is measured by default)
RECIPES = {
    "default": (default_transform, AUGMENT, "bench"),
    "ta_wide": (ta_wide_transform, TA_WIDE, "client"),
}


def loaderd_rate(binary, tar, workers, batch, augment=AUGMENT):
    """images/s of `loaderd bench` over two epochs of the tar."""
    out = subprocess.run([binary, "bench", "--source", f"tar:{tar}?size=any", "--augment", augment,
                          "--batch", str(batch), "--epochs", "2", "--workers", str(workers)],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"^total: .*: (\d+) images/s", out, re.M)
    if not m:
        raise SystemExit(f"loaderd bench printed no total:\n{out}")
    return float(m.group(1))


def client_rate(address, images, batch, augment, seed):
    """images/s of the Python client's stream (shared memory) from a
    daemon serving the tar as "large", after its first batch, over as many
    epochs as `images` takes: float32 NCHW batches in the loop, as the
    DataLoader's are."""
    import loaderd  # common put it on the path
    ds = loaderd.Dataset(address, "large", batch, seed=seed, augment=augment, transport="shm")

    def epochs():
        while True:
            yield from ds

    it = epochs()
    x, _ = next(it)
    assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (3, 224, 224), (x.dtype, x.shape)
    n, t0 = 0, time.perf_counter()
    for x, _ in it:
        n += x.shape[0]
        if n >= images:
            break
    r = n / (time.perf_counter() - t0)
    it.close()
    ds.close()
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tar", default=os.path.expanduser("~/.cache/loaderd/large-images-v1.tar"))
    ap.add_argument("--images", type=int, default=640)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--loaderd", help="a built loaderd binary: measure it in the same run")
    ap.add_argument("--recipe", choices=sorted(RECIPES), default="default",
                    help="default: crop, flip, normalize; ta_wide: + TrivialAugmentWide and RandomErasing(0.1)")
    ap.add_argument("--via", choices=("bench", "client"),
                    help="measure loaderd with `loaderd bench`, or through the Python client over shared memory "
                         "(default: bench for the default recipe, client for ta_wide)")
    ap.add_argument("--loaderd-workers", help="daemon workers to measure, e.g. 1,2 (default: 1,2 with bench, "
                                              "2 with client)")
    a = ap.parse_args()
    make_transform, augment, via = RECIPES[a.recipe]
    via = a.via or via
    ld_workers = [int(w) for w in (a.loaderd_workers or ("1,2" if via == "bench" else "2")).split(",")]
    torch.set_num_threads(1)
    ds = TarImages(a.tar, make_transform())
    print(f"{len(ds)} images in {a.tar}; torch {torch.__version__}, torchvision {torchvision.__version__}; "
          f"{os.cpu_count()} CPUs; recipe {a.recipe}: loaderd {augment!r} via {via}")
    dl, ld = {w: [] for w in (0, 1, 2)}, {w: [] for w in ld_workers}
    with contextlib.ExitStack() as stack:
        addresses = {}
        if a.loaderd and via == "client":
            import common  # the examples' directory is on sys.path: this script's own
            work = stack.enter_context(tempfile.TemporaryDirectory(prefix="compare-imagenet-"))
            for w in ld_workers:  # one daemon per worker count, each idle while the others run
                wd = os.path.join(work, f"workers{w}")
                os.makedirs(wd)
                d = stack.enter_context(common.daemon(wd, {"large": f"tar:{a.tar}?size=any"}, binary=a.loaderd,
                                                      workers=w))
                addresses[w] = d.address
        for r in range(a.repeats):
            for w in dl:
                dl[w].append(rate(ds, w, a.images, a.batch))
            if a.loaderd:
                for w in ld:
                    if via == "client":
                        ld[w].append(client_rate(addresses[w], a.images, a.batch, augment, seed=r))
                    else:
                        ld[w].append(loaderd_rate(a.loaderd, a.tar, w, a.batch, augment))
    print("| input | workers | images/s |")
    print("|---|---|---|")
    for w, rs in dl.items():
        print(f"| DataLoader | {w} | {statistics.median(rs):.0f} |")
    if a.loaderd:
        name = "loaderd" if via == "bench" else "loaderd (client, shm)"
        for w, rs in ld.items():
            print(f"| {name} | {w} | {statistics.median(rs):.0f} |")
        best_dl = max(statistics.median(rs) for rs in dl.values())
        best_ld = max(statistics.median(rs) for rs in ld.values())
        top = max(ld)
        print(f"loaderd / best DataLoader: {best_ld / best_dl:.2f}x "
              f"(runs: DataLoader {[round(r) for r in dl[2]]} at 2 workers, loaderd {[round(r) for r in ld[top]]}"
              f"{'' if top == 2 else f' at {top} workers'})")


if __name__ == "__main__":
    main()
