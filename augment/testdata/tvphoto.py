"""Parity oracle for augment's photometric ops and random erasing:
torchvision 0.14's functional ops on PIL images, then on the tensor.

Reads cases.json from the directory given as argv[1]. Each case names a raw
u8 HWC image (h, w, c) and the steps augment drew for one sample, with
their parameters spelled out: torch's generator and augment's differ, so
parity is of pixels for the same draws. The script applies the steps in
order, as ColorJitter, Grayscale, RandomGrayscale, GaussianBlur and the
AutoAugment family's _apply_op would with those draws, then to_tensor,
normalize and erase, and writes the float32 CHW tensor to the case's "out"
file.

tables.json lists augmentation spaces (kind, bins, h, w); for each the
script writes the magnitude bins torchvision builds, op by op, to
tables_out.json.
"""
import json
import os
import sys

import numpy as np
import torch
from PIL import Image
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode
from torchvision.transforms import autoaugment as aa

d = sys.argv[1]
with open(os.path.join(d, "cases.json")) as f:
    cases = json.load(f)

jitter = [F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue]


def fill_arg(fill):
    # AutoAugment hands its fill to the PIL ops as given: None, a number or
    # one value per band.
    if not fill:
        return None
    if len(fill) == 1:
        return fill[0]
    return list(fill)


for c in cases:
    a = np.fromfile(os.path.join(d, c["in"]), dtype=np.uint8)
    h, w, ch = c["h"], c["w"], c["c"]
    a = a.reshape(h, w, ch) if ch == 3 else a.reshape(h, w)
    img = Image.fromarray(a, "RGB" if ch == 3 else "L")
    for s in c["steps"] or []:
        k = s["kind"]
        if k == "jitter":
            for i in s["order"]:
                if s["on"][i]:
                    img = jitter[i](img, s["factors"][i])
        elif k == "grayscale":
            img = F.rgb_to_grayscale(img, num_output_channels=s["channels"])
        elif k == "blur":
            img = F.gaussian_blur(img, s["kernel"], [s["sigma"], s["sigma"]])
        elif k == "op":
            img = aa._apply_op(img, s["op"], s["magnitude"], InterpolationMode.NEAREST, fill_arg(s.get("fill")))
        else:
            raise SystemExit("unknown step " + k)
    t = F.to_tensor(img)
    t = F.normalize(t, c["mean"], c["std"])
    e = c.get("erase")
    if e:
        v = torch.tensor(e["value"], dtype=torch.float32)[:, None, None]
        t = F.erase(t, e["i"], e["j"], e["h"], e["w"], v)
    t.contiguous().numpy().astype(np.float32).tofile(os.path.join(d, c["out"]))

with open(os.path.join(d, "tables.json")) as f:
    tables = json.load(f)
out = []
for tb in tables:
    if tb["kind"] == "auto":
        space = aa.AutoAugment()._augmentation_space(tb["bins"], (tb["h"], tb["w"]))
    else:
        space = aa.TrivialAugmentWide()._augmentation_space(tb["bins"])
    out.append({name: [float(x) for x in m.reshape(-1).tolist()] if m.ndim > 0 else None for name, (m, _) in space.items()})
with open(os.path.join(d, "tables_out.json"), "w") as f:
    json.dump(out, f)
