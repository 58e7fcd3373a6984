"""Parity oracle for augment's geometric ops: torchvision 0.14 on PIL.

Reads cases.json from the directory given as argv[1]; each case names a raw
u8 HWC image (h, w, c) and an op with explicit parameters, and this script
writes torchvision's result as raw u8 HWC bytes to the case's "out" file.
The random op's box is given, not drawn: torch's generator and augment's
differ, so parity is of pixels for the same box.
"""
import json
import os
import sys

import numpy as np
from PIL import Image
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode

d = sys.argv[1]
with open(os.path.join(d, "cases.json")) as f:
    cases = json.load(f)
for c in cases:
    a = np.fromfile(os.path.join(d, c["in"]), dtype=np.uint8)
    h, w, ch = c["h"], c["w"], c["c"]
    a = a.reshape(h, w, ch) if ch == 3 else a.reshape(h, w)
    img = Image.fromarray(a, "RGB" if ch == 3 else "L")
    op = c["op"]
    if op == "resize":
        img = F.resize(img, c["size"], InterpolationMode.BILINEAR)
    elif op == "resize_center":
        img = F.resize(img, c["size"], InterpolationMode.BILINEAR)
        img = F.center_crop(img, c["crop"])
    elif op == "center_crop":
        img = F.center_crop(img, c["crop"])
    elif op == "resized_crop":
        t, l, bh, bw = c["box"]
        img = F.resized_crop(img, t, l, bh, bw, [c["size"], c["size"]], InterpolationMode.BILINEAR)
    else:
        raise SystemExit("unknown op " + op)
    np.asarray(img, dtype=np.uint8).tofile(os.path.join(d, c["out"]))
