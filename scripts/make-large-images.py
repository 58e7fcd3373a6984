#!/usr/bin/python3
"""Make the large-image test set: ImageNet-sized JPEGs in a tar.

Usage: /usr/bin/python3 scripts/make-large-images.py OUT.tar [COUNT]

Cuts COUNT (default 3000) images from the photographs Debian's
mate-backgrounds and gnome-backgrounds ship (scripts/jpeg-setup.sh installs
them), one class per photograph: a random window (a quarter to all of the
photograph's area, aspect ratio 3:4 to 4:3) resized with PIL's LANCZOS (reducing_gap 2) so
the shorter side is 300-500 pixels, then JPEG-encoded by PIL at quality
85-95 with a mix of chroma subsampling (4:4:4 30%, 4:2:2 20%, 4:2:0 50%),
progressive (25%) and greyscale (10%) files. Nothing is downloaded; the
output is a function of COUNT and the packages' files (seeded RNG, sorted
names, fixed owners and times), written as OUT.tar/<class>/NNNNN.jpg under
the directory "large/".
"""
import io
import os
import random
import sys
import tarfile

from PIL import Image

PHOTOS = [
    "/usr/share/backgrounds/mate/nature/Aqua.jpg",
    "/usr/share/backgrounds/mate/nature/Blinds.jpg",
    "/usr/share/backgrounds/mate/nature/Dune.jpg",
    "/usr/share/backgrounds/mate/nature/FreshFlower.jpg",
    "/usr/share/backgrounds/mate/nature/Garden.jpg",
    "/usr/share/backgrounds/mate/nature/GreenMeadow.jpg",
    "/usr/share/backgrounds/mate/nature/LadyBird.jpg",
    "/usr/share/backgrounds/mate/nature/RainDrops.jpg",
    "/usr/share/backgrounds/mate/nature/Storm.jpg",
    "/usr/share/backgrounds/mate/nature/TwoWings.jpg",
    "/usr/share/backgrounds/mate/nature/Wood.jpg",
    "/usr/share/backgrounds/mate/nature/YellowFlower.jpg",
    "/usr/share/backgrounds/mate/abstract/Elephants.jpg",
    "/usr/share/backgrounds/mate/desktop/GreenTraditional.jpg",
    "/usr/share/backgrounds/gnome/wood-l.webp",
    "/usr/share/backgrounds/gnome/licorice-l.webp",
]


def load(path):
    """The photograph as RGB, its longer side at most 1200 pixels."""
    with Image.open(path) as im:
        im.draft("RGB", (1200, 1200))  # a JPEG decodes at a DCT scale
        im = im.convert("RGB")
    scale = 1200 / max(im.size)
    if scale < 1:
        im = im.resize((round(im.width * scale), round(im.height * scale)), Image.LANCZOS)
    return im


def cut(rng, im):
    """A random window of im, resized to a shorter side of 300-500."""
    area = im.width * im.height * rng.uniform(0.25, 1.0)
    ratio = rng.uniform(3 / 4, 4 / 3)
    w = min(im.width, round((area * ratio) ** 0.5))
    h = min(im.height, round((area / ratio) ** 0.5))
    x, y = rng.randint(0, im.width - w), rng.randint(0, im.height - h)
    short = rng.randint(300, 500)
    s = short / min(w, h)
    size = (max(short, round(w * s)), max(short, round(h * s)))
    return im.resize(size, Image.LANCZOS, box=(x, y, x + w, y + h), reducing_gap=2.0)


def encode(rng, im):
    kw = {"quality": rng.randint(85, 95)}
    if rng.random() < 0.10:
        im = im.convert("L")
    else:
        kw["subsampling"] = rng.choices([0, 1, 2], weights=[30, 20, 50])[0]
    if rng.random() < 0.25:
        kw["progressive"] = True
    buf = io.BytesIO()
    im.save(buf, "JPEG", **kw)
    return buf.getvalue()


def main(out, count):
    photos = [p for p in PHOTOS if os.path.exists(p)]
    if len(photos) < 8:
        sys.exit(f"make-large-images: only {len(photos)} photographs found; run scripts/jpeg-setup.sh")
    sources = [load(p) for p in photos]
    names = [os.path.splitext(os.path.basename(p))[0].lower() for p in photos]
    rng = random.Random(20261123)
    members = []
    for i in range(count):
        k = i % len(sources)
        data = encode(rng, cut(rng, sources[k]))
        members.append((f"large/{names[k]}/{i:05d}.jpg", data))
    members.sort()
    tmp = f"{out}.tmp{os.getpid()}"  # concurrent makers never share it
    with tarfile.open(tmp, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.mode, ti.uname, ti.gname = len(data), 0, 0o644, "root", "root"
            tf.addfile(ti, io.BytesIO(data))
    os.replace(tmp, out)
    total = sum(len(d) for _, d in members)
    print(f"make-large-images: {out}: {count} JPEGs in {len(names)} classes, {total / 2**20:.1f} MiB")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 3000)
