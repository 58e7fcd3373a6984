"""Extra fields (fields=) and multi-label targets (labels=) of a
WebDataset tar, through a real daemon: captions and JSON documents come
as bytes, absent members as None, label sets as multi-hot targets."""

import io
import tarfile

import numpy as np
import pytest
import torch
from PIL import Image

import loaderd
from conftest import Daemon

N, CLASSES = 30, 5


def tags_of(i):
    return [[i % 5], [0, 4], [1, 2, 3]][i % 3]


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    shard = tmp_path_factory.mktemp("shard") / "shard-0.tar"
    with tarfile.open(shard, "w") as tf:
        def put(name, data):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        for i in range(N):
            png = io.BytesIO()
            Image.fromarray(np.full((32, 32, 3), i * 8, dtype=np.uint8)).save(png, format="PNG")
            put(f"{i:03d}.png", png.getvalue())
            put(f"{i:03d}.txt", f"caption of {i}".encode())
            if i % 2 == 0:
                put(f"{i:03d}.json", f'{{"i": {i}}}'.encode())
            put(f"{i:03d}.tags", ",".join(map(str, tags_of(i))).encode())
    return shard


def start(binary, tmp, shard):
    d = Daemon(binary, tmp, {"wds": f"tar:{shard}?fields=txt,json&labels=tags"})
    d.start()
    return d


@pytest.fixture(scope="module")
def wds(binary, shard, tmp_path_factory):
    d = start(binary, tmp_path_factory.mktemp("wds"), shard)
    yield d
    d.stop()


def check(ds):
    try:
        seen = 0
        for b in ds.batches():
            assert set(b.fields) == {"txt", "json"}
            assert b.targets.dtype == torch.float32 and b.targets.shape == (len(b), CLASSES)
            for k, i in enumerate(b.indices.tolist()):
                assert b.fields["txt"][k] == f"caption of {i}".encode()
                assert b.fields["json"][k] == (f'{{"i": {i}}}'.encode() if i % 2 == 0 else None)
                want = torch.zeros(CLASSES)
                want[tags_of(i)] = 1
                assert torch.equal(b.targets[k], want)
                assert int(b.labels[k]) == tags_of(i)[0]
            images, targets = b  # a multi-label batch unpacks to its targets
            assert targets is b.targets
            seen += len(b)
        assert seen == N
    finally:
        ds.close()


@pytest.mark.parametrize("transport", ["shm", "inline"])
def test_fields_and_targets(wds, transport):
    check(loaderd.Dataset(wds.address, "wds", 8, seed=1, transport=transport))


def test_pool_fields_and_targets(binary, shard, wds, tmp_path):
    other = start(binary, tmp_path, shard)
    try:
        check(loaderd.Dataset(f"{wds.address},{other.address}", "wds", 8, seed=1, transport="inline"))
    finally:
        other.stop()


def test_pairs_give_targets(wds):
    ds = loaderd.Dataset(wds.address, "wds", 10, seed=2)
    try:
        n = 0
        for images, targets in ds:
            assert targets.dtype == torch.float32 and targets.shape == (len(images), CLASSES)
            assert bool((targets.sum(1) >= 1).all())
            n += 1
        assert n == len(ds)
    finally:
        ds.close()
