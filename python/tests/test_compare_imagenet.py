"""python/examples/compare_imagenet.py kept from rotting: both recipes,
DataLoader and loaderd in one short run on a small tar of JPEGs made here."""

import io
import os
import pathlib
import re
import subprocess
import sys
import tarfile

import numpy as np
import pytest

pytest.importorskip("torchvision")
from PIL import Image  # noqa: E402

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "python" / "examples" / "compare_imagenet.py"


def small_tar(path, n=24):
    """n JPEGs in two classes, shorter side 240-300, some progressive and
    some greyscale, as in the large-image set."""
    rng = np.random.default_rng(3)
    with tarfile.open(path, "w") as t:
        for i in range(n):
            h, w = int(rng.integers(240, 300)), int(rng.integers(240, 360))
            y, x = np.mgrid[0:h, 0:w]
            px = np.stack([x * 255 // w, y * 255 // h, (x ^ y) % 256], axis=-1) ^ rng.integers(0, 32, (h, w, 3))
            img = Image.fromarray(px.astype(np.uint8))
            if i % 7 == 3:
                img = img.convert("L")
            buf = io.BytesIO()
            img.save(buf, "JPEG", quality=90, progressive=i % 4 == 1)
            info = tarfile.TarInfo(f"large/c{i % 2}/{i:05d}.jpg")
            info.size = len(buf.getvalue())
            t.addfile(info, io.BytesIO(buf.getvalue()))


@pytest.mark.parametrize("recipe", ["default", "ta_wide"])
def test_compare_imagenet_smoke(binary, tmp_path, recipe):
    tar = tmp_path / "small.tar"
    small_tar(tar)
    env = dict(os.environ)
    env.pop("LOADERD_BIN", None)  # --loaderd names it
    out = subprocess.run([sys.executable, str(SCRIPT), "--tar", str(tar), "--recipe", recipe, "--images", "32",
                          "--batch", "8", "--repeats", "1", "--loaderd", str(binary)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "24 images in" in text, text
    for w in (0, 1, 2):
        assert re.search(rf"^\| DataLoader \| {w} \| \d+ \|$", text, re.M), text
    row = r"loaderd" if recipe == "default" else r"loaderd \(client, shm\)"
    assert re.search(rf"^\| {row} \| 2 \| \d+ \|$", text, re.M), text
    m = re.search(r"^loaderd / best DataLoader: ([\d.]+)x", text, re.M)
    assert m and float(m.group(1)) > 0, text
