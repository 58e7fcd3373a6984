"""python/examples/recipe_ta_wide.py --smoke: the torchvision reference
recipe of docs/PYTORCH.md (TrivialAugmentWide, RandomErasing, MixUp/CutMix
with soft labels) runs against a real daemon on a folder of JPEGs of
varied sizes: a few CPU steps of a tiny model, a checkpoint, a resume that
completes the two epochs exactly, and the evaluation."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("torch")
pytest.importorskip("PIL")


def test_recipe_smoke(binary, tmp_path):
    env = dict(os.environ, LOADERD_BIN=str(binary))
    script = ROOT / "python" / "examples" / "recipe_ta_wide.py"
    r = subprocess.run([sys.executable, str(script), "--smoke"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "smoke: ok" in r.stdout, r.stdout + r.stderr
    assert "epoch 1:" in r.stdout, r.stdout
