"""CIFAR-10 binary files and image-folder tars as numpy arrays.

Helpers for tests, examples and converting data for the daemon's cifar:DIR
format: records of 1 label byte + 3072 pixel bytes (32x32, R plane, G
plane, B plane) in data_batch_N.bin, class names in batches.meta.txt.
"""

from __future__ import annotations

import io
import os
import tarfile
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

_PathLike = Union[str, "os.PathLike[str]"]

RECORD = 1 + 3 * 32 * 32
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def write_cifar10(directory: _PathLike, images: npt.ArrayLike, labels: npt.ArrayLike,
                  classes: Sequence[str] = CLASSES, per_file: int = 10000) -> List[str]:
    """Write images (N, 32, 32, 3) uint8 HWC and labels (N,) as CIFAR-10
    binary files data_batch_1.bin, ... of per_file records each, plus
    batches.meta.txt. Returns the file paths. Dataset index i is record i
    across the files in order."""
    images = np.asarray(images, dtype=np.uint8)
    labels = np.asarray(labels)
    if images.ndim != 4 or images.shape[1:] != (32, 32, 3) or len(labels) != len(images):
        raise ValueError(f"cifar: want (N, 32, 32, 3) images and N labels, got {images.shape} and {labels.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() > 255):
        raise ValueError("cifar: labels must fit a byte")
    os.makedirs(directory, exist_ok=True)
    records = np.empty((len(images), RECORD), dtype=np.uint8)
    records[:, 0] = labels
    records[:, 1:] = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    paths = []
    for k, start in enumerate(range(0, len(images), per_file)):
        path = os.path.join(directory, f"data_batch_{k + 1}.bin")
        records[start:start + per_file].tofile(path)
        paths.append(path)
    with open(os.path.join(directory, "batches.meta.txt"), "w") as f:
        f.write("".join(c + "\n" for c in classes))
    return paths


def read_cifar10(directory: _PathLike) -> Tuple[np.ndarray, np.ndarray]:
    """(images (N, 32, 32, 3) uint8 HWC, labels (N,) int64) from the
    data_batch_N.bin files of directory, in dataset-index order."""
    names = sorted((n for n in os.listdir(directory) if n.startswith("data_batch_") and n.endswith(".bin")),
                   key=lambda n: int(n[len("data_batch_"):-len(".bin")]))
    raw = np.concatenate([np.fromfile(os.path.join(directory, n), dtype=np.uint8) for n in names])
    if raw.size % RECORD:
        raise ValueError(f"cifar: {directory}: {raw.size} bytes is not a whole number of records")
    records = raw.reshape(-1, RECORD)
    images = records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy()
    return images, records[:, 0].astype(np.int64)


def load_image_tar(path: _PathLike, limit: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray, List[str]]:
    """Decode an image-folder tar (<split>/<class>/<file>.jpg) with PIL into
    (images (N, H, W, 3) uint8, labels (N,) int64, classes), classes sorted
    by name as torchvision's ImageFolder orders them, members in tar order."""
    from PIL import Image

    items = []
    with tarfile.open(path) as tar:
        for m in tar:
            if not m.isfile() or not m.name.lower().endswith((".jpg", ".jpeg", ".png")):
                continue
            parts = m.name.split("/")
            if len(parts) < 2:
                continue
            f = tar.extractfile(m)
            if f is None:  # not a regular file after all (isfile() said it was)
                continue
            with Image.open(io.BytesIO(f.read())) as im:
                items.append((parts[-2], np.asarray(im.convert("RGB"))))
            if limit is not None and len(items) >= limit:
                break
    classes = sorted({c for c, _ in items})
    index = {c: i for i, c in enumerate(classes)}
    images = np.stack([a for _, a in items]) if items else np.empty((0, 32, 32, 3), np.uint8)
    labels = np.array([index[c] for c, _ in items], dtype=np.int64)
    return images, labels, classes
