"""Map-style access: ds[i] and ds.get(indices) (GetSamples) against the
source records and against what a stream delivers for the same index."""

import pytest
import torch

from conftest import N


def test_raw_getitem_is_the_record_as_chw(open_dataset, data):
    ds = open_dataset(batch_size=8)
    _, images, labels = data["c10"]
    assert ds.dataset_size == N and len(ds) == N // 8  # len stays the loop's batches
    for i in (0, 7, 401, N - 1, -1, -N):
        img, label = ds[i]
        j = i % N
        assert img.dtype == torch.uint8 and tuple(img.shape) == (3, 32, 32)
        assert torch.equal(img, torch.from_numpy(images[j]).permute(2, 0, 1)) and label == labels[j]
    got = ds.get(torch.tensor([5, 5, 999]))
    assert [lab for _, lab in got] == [labels[5], labels[5], labels[999]]
    assert [lab for _, lab in ds[2:5]] == list(labels[2:5])


@pytest.mark.parametrize("i", [N, -N - 1, 10 ** 9])
def test_out_of_range_is_index_error(open_dataset, i):
    with pytest.raises(IndexError, match=f"index {i} out of range for a dataset of {N} samples"):
        open_dataset()[i]


def test_augmented_getitem_equals_the_stream(open_dataset):
    spec = "crop=32:4,flip=0.5,color_jitter=0.4:0.4:0.4:0.1,normalize=cifar10,out=f32:chw"
    ds = open_dataset(batch_size=16, augment=spec, seed=11, transport="inline")
    ds.set_epoch(2)
    b = next(iter(ds.batches()))
    try:
        idx, imgs, labs = b.indices.tolist(), b.images.clone(), b.labels.tolist()
    finally:
        b.release()
    got = ds.get(idx)
    assert len(got) == len(idx)
    for k, (img, label) in enumerate(got):
        assert img.dtype == torch.float32 and tuple(img.shape) == (3, 32, 32)
        assert torch.equal(img, imgs[k]) and label == labs[k], f"index {idx[k]}"
    img, _ = ds[idx[0]]
    assert torch.equal(img, imgs[0])
    ds.set_epoch(3)  # another epoch, another draw
    assert any(not torch.equal(a, imgs[k]) for k, (a, _) in enumerate(ds.get(idx)))


def test_many_samples_take_several_calls(open_dataset, data):
    ds = open_dataset()
    _, images, labels = data["c10"]
    got = ds.get(range(N))
    assert len(got) == N and all(lab == labels[i] for i, (_, lab) in enumerate(got))
    assert torch.equal(got[N - 1][0], torch.from_numpy(images[N - 1]).permute(2, 0, 1))
