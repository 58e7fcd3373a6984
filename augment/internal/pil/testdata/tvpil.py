"""Oracle for pil's parity test: applies torchvision 0.14's functional ops
to PIL images read from raw HWC bytes, as described by cases.json.

Usage: tvpil.py DIR. Every case names its input and output files in DIR,
the shape (h, w, c), the op and the op's parameters; the output is the
raw bytes of the resulting PIL image.
"""

import json
import os
import sys

from PIL import Image
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode
from torchvision.transforms.autoaugment import _apply_op


def fill_arg(fill):
    # A single value is passed as a number, which torchvision repeats for
    # every band; otherwise one value per band.
    if fill is None:
        return None
    if len(fill) == 1:
        return fill[0]
    return list(fill)


def run(case, img):
    op = case["op"]
    p = case.get("p", {})
    if op == "brightness":
        return F.adjust_brightness(img, p["factor"])
    if op == "contrast":
        return F.adjust_contrast(img, p["factor"])
    if op == "saturation":
        return F.adjust_saturation(img, p["factor"])
    if op == "hue":
        return F.adjust_hue(img, p["factor"])
    if op == "sharpness":
        return F.adjust_sharpness(img, p["factor"])
    if op == "grayscale":
        return F.rgb_to_grayscale(img, num_output_channels=p["channels"])
    if op == "posterize":
        return F.posterize(img, p["bits"])
    if op == "solarize":
        return F.solarize(img, p["threshold"])
    if op == "autocontrast":
        return F.autocontrast(img)
    if op == "equalize":
        return F.equalize(img)
    if op == "invert":
        return F.invert(img)
    if op == "affine":
        return F.affine(
            img,
            angle=p["angle"],
            translate=p["translate"],
            scale=p["scale"],
            shear=p["shear"],
            interpolation=InterpolationMode.NEAREST,
            fill=fill_arg(p.get("fill")),
            center=p.get("center"),
        )
    if op == "rotate":
        return F.rotate(img, p["angle"], interpolation=InterpolationMode.NEAREST, fill=fill_arg(p.get("fill")))
    if op == "gaussian_blur":
        return F.gaussian_blur(img, p["kernel"], p["sigma"])
    if op == "apply_op":
        return _apply_op(img, p["name"], p["magnitude"], InterpolationMode.NEAREST, fill_arg(p.get("fill")))
    raise ValueError("unknown op " + op)


def main():
    d = sys.argv[1]
    with open(os.path.join(d, "cases.json")) as f:
        cases = json.load(f)
    for case in cases:
        h, w, c = case["h"], case["w"], case["c"]
        with open(os.path.join(d, case["in"]), "rb") as f:
            raw = f.read()
        img = Image.frombytes("L" if c == 1 else "RGB", (w, h), raw)
        out = run(case, img)
        with open(os.path.join(d, case["out"]), "wb") as f:
            f.write(out.tobytes())


if __name__ == "__main__":
    main()
