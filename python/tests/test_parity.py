"""The client's tensors against torchvision's transforms on the same images."""

import pytest
import torch
import torchvision.transforms.functional as TF
from PIL import Image

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def reference(hwc, pad=0, top=0, left=0, flip=False):
    """RandomCrop(32, padding=pad) at (top, left), RandomHorizontalFlip as
    flip, ToTensor, Normalize: the classic CIFAR pipeline with its random
    choices fixed."""
    im = Image.fromarray(hwc)
    if pad:
        im = TF.pad(im, pad)  # constant 0, RandomCrop's default
        im = TF.crop(im, top, left, 32, 32)
    if flip:
        im = TF.hflip(im)
    return TF.normalize(TF.to_tensor(im), MEAN, STD)


@pytest.mark.parametrize("transport", ["shm", "inline"])
@pytest.mark.parametrize("spec", ["normalize=cifar10,out=f32:chw", "crop=32:0,normalize=cifar10,out=f32:chw"])
def test_plain_matches_totensor_normalize(open_dataset, data, transport, spec):
    _, images, _ = data["c10"]
    ds = open_dataset(augment=spec, transport=transport, batch_size=100)
    seen = 0
    for b in ds.batches():
        assert b.images.dtype == torch.float32 and b.images.shape == (len(b.indices), 3, 32, 32)
        want = torch.stack([reference(images[i]) for i in b.indices.tolist()])
        assert (b.images - want).abs().max().item() <= 1e-6
        seen += len(b.indices)
    assert seen == len(images)


@pytest.mark.parametrize("transport", ["shm", "inline"])
def test_augmented_matches_crop_and_flip_with_reported_params(open_dataset, data, transport):
    _, images, _ = data["c10"]
    ds = open_dataset(augment="crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw", include_params=True,
                      transport=transport, batch_size=100)
    flips, origins = set(), set()
    for b in ds.batches():
        p = b.params
        assert p is not None and len(p.top) == len(p.left) == len(p.flip) == len(b.indices)
        assert 0 <= p.top.min() and p.top.max() <= 8 and 0 <= p.left.min() and p.left.max() <= 8
        want = torch.stack([reference(images[i], 4, t, l, f) for i, t, l, f in
                            zip(b.indices.tolist(), p.top.tolist(), p.left.tolist(), p.flip.tolist())])
        assert (b.images - want).abs().max().item() <= 1e-6
        flips.update(p.flip.tolist())
        origins.update(zip(p.top.tolist(), p.left.tolist()))
    # Random choices really happened: both flips and many crop origins.
    assert flips == {False, True}
    assert len(origins) > 40


def test_default_augment_is_the_classic_pipeline(open_dataset, data):
    _, images, _ = data["c10"]
    ds = open_dataset(include_params=True)  # no spec: the dataset's default
    it = ds.batches()
    b = next(it)
    p = b.params
    want = torch.stack([reference(images[i], 4, t, l, f) for i, t, l, f in
                        zip(b.indices.tolist(), p.top.tolist(), p.left.tolist(), p.flip.tolist())])
    assert (b.images - want).abs().max().item() <= 1e-6


@pytest.mark.parametrize("dtype,torch_dtype", [("f16", torch.float16), ("bf16", torch.bfloat16)])
def test_half_types_equal_torch_rounding_of_the_f32_result(open_dataset, data, dtype, torch_dtype):
    _, images, _ = data["c10"]
    ds = open_dataset(augment="normalize=cifar10", dtype=dtype, batch_size=250)
    for b in ds.batches():
        assert b.images.dtype == torch_dtype
        want = torch.stack([reference(images[i]) for i in b.indices.tolist()])
        assert torch.equal(b.images, want.to(torch_dtype))


def test_hwc_layout_is_the_chw_tensor_permuted(open_dataset):
    chw = open_dataset(augment="normalize=cifar10,out=f32:chw", shuffle=False)
    hwc = open_dataset(augment="normalize=cifar10,out=f32:hwc", shuffle=False)
    ia, ib = chw.batches(), hwc.batches()  # kept: a dropped iterator releases its batch
    a, b = next(ia), next(ib)
    assert b.images.shape == (64, 32, 32, 3)
    assert torch.equal(a.indices, b.indices)
    assert torch.equal(a.images.permute(0, 2, 3, 1), b.images)
