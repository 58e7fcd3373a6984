"""normalize_on: the daemon sends uint8 pixels and a value table; the client
makes the daemon's tensor from them on the device, bit for bit."""

import itertools

import pytest
import torch

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


@pytest.mark.parametrize("transport", ["shm", "inline"])
@pytest.mark.parametrize("name,augment,dtype,layout,batches", CASES)
def test_normalize_on_cpu_is_exact(open_dataset, transport, name, augment, dtype, layout, batches):
    kw = dict(augment=augment, dtype=dtype, layout=layout, transport=transport, batch_size=100)
    ref = open_dataset(name, **kw).batches()
    mine = open_dataset(name, normalize_on="cpu", **kw).batches()
    n = 0
    for a, b in itertools.islice(zip(ref, mine), batches):
        if n == 0:  # the wire carries uint8 and the table
            h = mine._session.header
            assert h.dtype == pb.DTYPE_U8 and h.value_dtype == ref._session.header.dtype and len(h.value_table) >= 3 * 256
        assert b.images.dtype == a.images.dtype and b.images.shape == a.images.shape
        assert b.images.device == torch.device("cpu")
        assert torch.equal(bits(b.images), bits(a.images)), f"batch {n}"
        assert torch.equal(b.indices, a.indices)
        n += 1
    assert n == (batches or 10)
    ref.close()
    mine.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")
def test_normalize_on_cuda_is_exact(open_dataset):
    kw = dict(augment="crop=32:4,flip=0.5,normalize=cifar10", dtype="bf16", batch_size=100, pin=True)
    for a, b in zip(open_dataset(**kw).batches(), open_dataset(normalize_on="cuda", **kw).batches()):
        assert b.images.device.type == "cuda"
        assert torch.equal(bits(b.images.cpu()), bits(a.images))


def test_normalize_on_refuses_a_non_device(open_dataset):
    with pytest.raises(ValueError, match="normalize_on"):
        open_dataset(normalize_on="gpu-please")
