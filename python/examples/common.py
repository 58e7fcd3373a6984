"""Shared pieces of the examples: the classic CIFAR input pipeline, data
preparation from the JPEG tar, and a daemon started for the duration."""

import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile

import numpy as np
import torch
import torchvision.transforms as T
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import loaderd  # installed: pip install ./python
except ImportError:  # or straight from the checkout
    sys.path.insert(0, str(ROOT / "python"))
    import loaderd  # noqa: E402
from loaderd import cifar  # noqa: E402

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
SPEC = "crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw"  # the same pipeline in loaderd
DEFAULT_TAR = ROOT.parent / "shared" / "data" / "cifar10-train-jpg.tar"


def classic_transform():
    """RandomCrop(32, 4), RandomHorizontalFlip, ToTensor, Normalize."""
    return T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])


class CIFARArrays(torch.utils.data.Dataset):
    """torchvision.datasets.CIFAR10 without its download and checksum: uint8
    HWC arrays in memory, one PIL image per sample through the transform."""

    def __init__(self, directory, transform=None):
        self.data, self.targets = cifar.read_cifar10(directory)
        self.transform = transform

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        img = Image.fromarray(self.data[i])
        if self.transform is not None:
            img = self.transform(img)
        return img, int(self.targets[i])


def prepare(workdir, tar=DEFAULT_TAR, folder=False, limit=None):
    """CIFAR-10 binary files decoded from the JPEG tar under workdir (made
    once, then reused), and with folder the tar extracted for ImageFolder.
    Returns (binary dir, folder root or None)."""
    workdir = pathlib.Path(workdir)
    bindir = workdir / "cifar-bin"
    if not (bindir / "batches.meta.txt").exists():
        images, labels, classes = cifar.load_image_tar(tar, limit=limit)
        tmp = pathlib.Path(tempfile.mkdtemp(dir=workdir, prefix=".bin"))
        cifar.write_cifar10(tmp, images, labels, classes)
        tmp.rename(bindir)
    jpgdir = None
    if folder:
        jpgdir = workdir / "jpg"
        if not jpgdir.exists():
            tmp = pathlib.Path(tempfile.mkdtemp(dir=workdir, prefix=".jpg"))
            with tarfile.open(tar) as t:
                t.extractall(tmp)
            tmp.rename(jpgdir)
        jpgdir = jpgdir / "train"
    return bindir, jpgdir


def daemon_binary(workdir):
    """loaderd from $LOADERD_BIN or PATH, else built from this checkout."""
    try:
        return loaderd.find_binary()
    except loaderd.Error:
        out = pathlib.Path(workdir) / "loaderd"
        env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/local/go/bin")
        subprocess.run(["go", "build", "-o", str(out), "./cmd/loaderd"], cwd=ROOT, env=env, check=True)
        return str(out)


def daemon(workdir, datasets, binary=None, workers=2):
    """loaderd.serve() for the examples: a daemon on a private Unix socket,
    stopped when the with block ends; its log goes to workdir/loaderd.log."""
    return loaderd.serve(datasets, binary=binary or daemon_binary(workdir), workers=workers,
                         log=pathlib.Path(workdir) / "loaderd.log")


def default_workdir(name):
    d = pathlib.Path(tempfile.gettempdir()) / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def median(xs):
    return float(np.median(xs))
