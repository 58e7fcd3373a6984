"""Decode images with PIL as torchvision's loader does and print hashes.

Usage: /usr/bin/python3 pilhash.py FILE...

Each FILE is a tar (every member with an image extension is read) or an
image file. For each image one line goes to stdout:

    NAME<TAB>WIDTHxHEIGHT<TAB>SHA-256 of Image.open(f).convert("RGB").tobytes()

NAME is the tar member's name, or the file's path; an image PIL cannot
decode prints "error: MESSAGE" in place of the size and hash. The Go tests
(loader/imagedec) compare these with the TurboJPEG decoder's output.
"""
import hashlib
import io
import sys
import tarfile

from PIL import Image

EXTS = (".jpg", ".jpeg", ".jpe", ".png")


def line(name, data):
    try:
        with Image.open(io.BytesIO(data)) as im:
            rgb = im.convert("RGB")
        h = hashlib.sha256(rgb.tobytes()).hexdigest()
        return f"{name}\t{rgb.width}x{rgb.height}\t{h}"
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        return f"{name}\terror: {e}\t-"


def main(paths):
    out = sys.stdout
    for p in paths:
        if tarfile.is_tarfile(p):
            with tarfile.open(p) as tf:
                for m in tf:
                    if m.isfile() and m.name.lower().endswith(EXTS):
                        out.write(line(m.name, tf.extractfile(m).read()) + "\n")
        else:
            with open(p, "rb") as f:
                out.write(line(p, f.read()) + "\n")
    out.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
