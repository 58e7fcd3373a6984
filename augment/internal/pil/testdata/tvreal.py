"""Decoder for pil's real-image parity test: picks JPEGs from the real
image sets, decodes them with PIL (the decoder torchvision's PIL path
uses) and writes the pixels both sides start from.

Usage: tvreal.py DIR CIFAR_TAR|- NCIFAR LARGE_TAR|- NLARGE

From the CIFAR-10 tar (train/CLASS/NNNN.jpg) it takes NCIFAR members
spread evenly over the sorted names, at their 32x32. From the large-image
tar (scripts/make-large-images.py) it takes NLARGE members, all but the
last spread evenly and the last the first greyscale one, each cut to its central 224x224 window, and the first of them whole,
resized with PIL's bilinear filter so that its longer side is at most
512. Greyscale JPEGs stay L (one channel), the rest are RGB. Each image
goes to DIR/<set>_<k>.raw as HWC bytes; DIR/manifest.json lists them:
set, member, h, w, c and the file.
"""

import json
import os
import sys
import tarfile

from PIL import Image


def pick(path, n, prefix, grey=False):
    """n members spread evenly over the sorted names; with grey, the last
    of them is the first greyscale JPEG instead."""
    with tarfile.open(path) as tf:
        names = sorted(m.name for m in tf if m.isfile() and m.name.endswith(".jpg") and m.name.startswith(prefix))
        if len(names) < n:
            sys.exit(f"tvreal: {path}: {len(names)} JPEGs, want {n}")
        chosen = [names[i * len(names) // n] for i in range(n)]
        if grey:
            for name in names:
                with tf.extractfile(name) as f:
                    if Image.open(f).mode == "L":  # reads the header only
                        chosen[-1] = name
                        break
        out = []
        for name in chosen:
            with tf.extractfile(name) as f:
                im = Image.open(f)
                im.load()
            if im.mode not in ("L", "RGB"):
                im = im.convert("RGB")
            out.append((name, im))
        return out


def centre(im, size):
    left, top = (im.width - size) // 2, (im.height - size) // 2
    return im.crop((left, top, left + size, top + size))


def main():
    d, cifar, ncifar, large, nlarge = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    images = []
    if cifar != "-":
        for name, im in pick(cifar, ncifar, "train/"):
            images.append(("cifar", name, im))
    if large != "-":
        picked = pick(large, nlarge, "large/", grey=True)
        for name, im in picked:
            images.append(("large224", name, centre(im, 224)))
        name, im = picked[0]
        s = 512 / max(im.size)
        if s < 1:
            im = im.resize((round(im.width * s), round(im.height * s)), Image.BILINEAR)
        images.append(("largefull", name, im))
    manifest = []
    for k, (set_, name, im) in enumerate(images):
        f = f"{set_}_{k}.raw"
        with open(os.path.join(d, f), "wb") as out:
            out.write(im.tobytes())
        manifest.append({"set": set_, "member": name, "h": im.height, "w": im.width, "c": len(im.getbands()), "in": f})
    with open(os.path.join(d, "manifest.json"), "w") as out:
        json.dump(manifest, out)


if __name__ == "__main__":
    main()
