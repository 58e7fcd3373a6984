"""random_resized_crop on images of varying sizes: the reported box, and the
tensors against torchvision's resized_crop on PIL's decode with that box."""

import ctypes.util

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as TF
from PIL import Image

import loaderd
from conftest import Daemon

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIZE = 24


@pytest.mark.parametrize("options", [
    "size=any&decoder=turbo",
    # exact=torchvision: no DCT-scaled decode, so every crop is
    # torchvision's; without size=, size=any is implied by the sizes.
    "decoder=turbo&exact=torchvision",
])
def test_resized_crop_box_reproduces_the_tensor(binary, tmp_path, options):
    if ctypes.util.find_library("turbojpeg") is None:
        pytest.skip("libturbojpeg absent: the daemon's pixels would not be PIL's (scripts/jpeg-setup.sh)")
    rng = np.random.default_rng(5)
    root = tmp_path / "imgs"
    images = {}
    for i, (h, w) in enumerate([(40, 60), (75, 50), (90, 90), (33, 70), (64, 64), (80, 45), (52, 88), (47, 47)]):
        d = root / f"c{i % 2}"
        d.mkdir(parents=True, exist_ok=True)
        y, x = np.mgrid[0:h, 0:w]
        px = np.stack([x * 255 // w, y * 255 // h, (x * y) % 256], axis=-1) ^ rng.integers(0, 16, (h, w, 3))
        p = d / f"{i:02d}.jpg"
        Image.fromarray(px.astype(np.uint8)).save(p, quality=90)
        images[str(p)] = Image.open(p).convert("RGB")
    dm = Daemon(binary, tmp_path, {"any": f"folder:{root}?{options}"})
    dm.start()
    try:
        ds = loaderd.Dataset(dm.address, "any", 4, seed=7, epochs=3, include_params=True,
                             augment=f"random_resized_crop={SIZE},flip=0.5,normalize=imagenet,out=f32:chw")
        exact, boxes, flips = 0, set(), set()
        for b in ds.batches(None):  # all three epochs
            p = b.params
            assert p.height is not None and p.width is not None
            assert len(p.top) == len(p.left) == len(p.height) == len(p.width) == len(p.flip) == len(b.indices)
            for k, name in enumerate(ds.sample_names(b.indices)):
                img = images[name]
                t, l, h, w, f = (int(p.top[k]), int(p.left[k]), int(p.height[k]), int(p.width[k]), bool(p.flip[k]))
                assert 0 <= t and 0 <= l and 0 < h and 0 < w and t + h <= img.height and l + w <= img.width, (name, t, l, h, w)
                # RandomResizedCrop's rule: area 8-100%, ratio 3/4-4/3 (or the
                # clamped central fallback, which is wider or as high as the image).
                assert h * w <= img.height * img.width and (0.08 * img.height * img.width <= h * w * 1.1 or
                                                            h == img.height or w == img.width)
                boxes.add((name, t, l, h, w))
                flips.add(f)
                if h >= 2 * SIZE and w >= 2 * SIZE and "exact=torchvision" not in options:
                    continue  # decoded at a reduced DCT scale: not PIL's full decode
                want = TF.resized_crop(img, t, l, h, w, [SIZE, SIZE])
                if f:
                    want = TF.hflip(want)
                want = TF.normalize(TF.to_tensor(want), MEAN, STD)
                assert (b.images[k] - want).abs().max().item() <= 1e-6, (name, t, l, h, w, f)
                exact += 1
            b.release()
        ds.close()
        assert exact >= 8 and len(boxes) >= 16 and flips == {False, True}, (exact, len(boxes), flips)
        if "exact=torchvision" in options:
            assert exact == 3 * len(images), "exact=torchvision: every crop is torchvision's"
    finally:
        dm.stop()
