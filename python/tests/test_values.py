"""normalize_on: the daemon sends uint8 pixels and a value table; the client
makes the daemon's tensor from them on the device, bit for bit."""

import itertools

import numpy as np
import pytest
import torch

from loaderd import _values
from loaderd.v1 import loader_pb2 as pb


def bits(t):
    """A tensor's bytes, so that equal means bit for bit (NaN included)."""
    return t.contiguous().view(torch.uint8)


CASES = [
    # dataset, augment, dtype, layout, batches compared
    ("c10", None, None, None, None),
    ("c10", "crop=32:4:9/99/199,flip=0.5,normalize=cifar10", "f32", "chw", None),
    ("c10", "crop=32:4,flip=0.5,normalize=cifar10", "f16", "hwc", None),
    ("c10", "crop=32:4,flip=0.5,normalize=imagenet", "bf16", "chw", None),
    ("c10", "crop=32:4,flip=0.5", "u8", "hwc", 3),
    ("big", "resize=40,center_crop=36,flip=0.5,normalize=imagenet", "f32", "hwc", 3),
]


@pytest.mark.parametrize("path", ["arithmetic", "gather"])
@pytest.mark.parametrize("transport", ["shm", "inline"])
@pytest.mark.parametrize("name,augment,dtype,layout,batches", CASES)
def test_normalize_on_cpu_is_exact(open_dataset, monkeypatch, path, transport, name, augment, dtype, layout, batches):
    if path == "gather":
        monkeypatch.setattr(_values.Affine, "find", classmethod(lambda cls, table, chw, dev: None))
    kw = dict(augment=augment, dtype=dtype, layout=layout, transport=transport, batch_size=100)
    ref = open_dataset(name, **kw).batches()
    mine = open_dataset(name, normalize_on="cpu", **kw).batches()
    n = 0
    for a, b in itertools.islice(zip(ref, mine), batches):
        if n == 0:  # the wire carries uint8 and the table
            h = mine._session.header
            assert h.dtype == pb.DTYPE_U8 and h.value_dtype == ref._session.header.dtype and len(h.value_table) >= 3 * 256
            # Every case here is x / 255 then normalize (or nothing, for u8):
            # the arithmetic must be found, or it would silently go unused.
            if h.value_dtype != pb.DTYPE_U8:
                assert (mine._session._values.affine is not None) == (path == "arithmetic")
        assert b.images.dtype == a.images.dtype and b.images.shape == a.images.shape
        assert b.images.device == torch.device("cpu")
        assert torch.equal(bits(b.images), bits(a.images)), f"batch {n}"
        assert torch.equal(b.indices, a.indices)
        n += 1
    assert n == (batches or 10)
    ref.close()
    mine.close()


@pytest.mark.parametrize("transport", ["shm", "inline"])
def test_normalize_on_cpu_reuses_buffers_no_view_holds(open_dataset, transport):
    """On a CPU the mapped batches come from a ring of buffers: one a
    tensor (or a view of it) still holds keeps its values while later
    batches arrive, and the ring stays small when the caller lets go."""
    kw = dict(augment="crop=32:4,flip=0.5,normalize=cifar10", dtype="f32", transport=transport, batch_size=100)
    it = open_dataset(normalize_on="cpu", **kw).batches()
    ref = open_dataset(**kw).batches()
    kept, kept_view = None, None
    for n, (a, b) in enumerate(zip(ref, it)):
        assert torch.equal(bits(b.images), bits(a.images)), f"batch {n}"
        if n == 0:
            kept, want = b.images, b.images.clone()
        if n == 1:
            kept_view, want_view = b.images[3:5], b.images[3:5].clone()
        b.release()
        del a, b
        if n == 11:
            break
    assert torch.equal(kept, want), "a buffer was reused under a tensor the caller holds"
    assert torch.equal(kept_view, want_view), "a buffer was reused under a view the caller holds"
    ring = it._session._values._out
    assert ring is not None and ring.allocated <= 5, f"{ring.allocated} buffers for 12 batches: none was reused"
    it.close()
    ref.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")
def test_normalize_on_cuda_is_exact(open_dataset):
    kw = dict(augment="crop=32:4,flip=0.5,normalize=cifar10", dtype="bf16", batch_size=100, pin=True)
    for a, b in zip(open_dataset(**kw).batches(), open_dataset(normalize_on="cuda", **kw).batches()):
        assert b.images.device.type == "cuda"
        assert torch.equal(bits(b.images.cpu()), bits(a.images))


def test_normalize_on_refuses_a_non_device(open_dataset):
    with pytest.raises(ValueError, match="normalize_on"):
        open_dataset(normalize_on="gpu-please")


def _table(mean, std, dtype=torch.float32):
    v = np.arange(256, dtype=np.float32) / np.float32(255)
    rows = [(v - np.float32(m)) / np.float32(s) for m, s in zip(mean, std)]
    return torch.from_numpy(np.stack(rows).astype(np.float32)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("chw", [True, False])
def test_affine_recovers_statistics(dtype, chw):
    """Any statistics in float32 (recovered from the table's ends), the
    named ones in every dtype; what is found maps every byte as the table."""
    stats = [((0.5, 0.25, 0.125), (0.5, 0.5, 0.5)), ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
             ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)), ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))]
    if dtype == torch.float32:
        stats.append(((0.31, 0.62, 0.93), (0.17, 0.33, 1.7)))
    for mean, std in stats:
        t = _table(mean, std, dtype)
        aff = _values.Affine.find(t, chw, torch.device("cpu"))
        assert aff is not None, (mean, std, dtype)
        probe = torch.arange(256, dtype=torch.uint8).repeat(3, 1).view(1, 3, 16, 16)
        if not chw:
            probe = probe.permute(0, 2, 3, 1)
        got = aff(probe)
        if not chw:
            got = got.permute(0, 3, 1, 2)
        assert torch.equal(got.reshape(3, 256).contiguous().view(torch.uint8), t.contiguous().view(torch.uint8))


def test_affine_refuses_what_is_not_affine():
    """A table no x / 255 and normalize gives (a gamma curve, one entry
    off by an ulp): the gather stays."""
    t = _table((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    gamma = torch.arange(256, dtype=torch.float32).div(255).pow(2.2).repeat(3, 1)
    assert _values.Affine.find(gamma, True, torch.device("cpu")) is None
    off = t.clone()
    off[1, 77] = float(np.nextafter(np.float32(off[1, 77].item()), np.float32(np.inf)))
    assert _values.Affine.find(off, True, torch.device("cpu")) is None
