"""Batch mixing (mixup, cutmix) and the photometric ops' params, through
a real daemon."""

import pytest
import torch

import loaderd

PLAIN = "normalize=cifar10,out={}:{}"


def torchvision_mix(x, mix):
    """torchvision v2's MixUp / CutMix on a batch, given their draw."""
    if mix.kind == "mixup":
        rolled = x.roll(1, 0).mul_(1.0 - mix.lam)
        return x.clone().mul_(mix.lam).add_(rolled)
    top, left, h, w = mix.box
    out = x.clone()
    out[..., top:top + h, left:left + w] = x.roll(1, 0)[..., top:top + h, left:left + w]
    return out


@pytest.mark.parametrize("transport", ["shm", "inline"])
def test_mixed_batches_are_torchvisions(open_dataset, transport):
    # The same seed without mixing gives the unmixed batches: normalize
    # alone draws nothing.
    plain = open_dataset(augment=PLAIN.format("f32", "chw"), batch_size=50, transport=transport)
    mixed = open_dataset(augment=PLAIN.format("f32", "chw") + ",mixup=0.4,cutmix=1", batch_size=50,
                         transport=transport)
    kinds = set()
    for p, m in zip(plain.batches(), mixed.batches()):
        assert m.mix is not None and p.mix is None and p.soft_labels is None
        assert torch.equal(p.indices, m.indices) and torch.equal(p.labels, m.labels)
        assert torch.equal(m.images, torchvision_mix(p.images, m.mix)), m.mix
        kinds.add(m.mix.kind)
        if m.mix.kind == "cutmix":
            top, left, h, w = m.mix.box
            assert 0 <= top and top + h <= 32 and 0 <= left and left + w <= 32
            assert m.mix.lam == 1 - h * w / (32 * 32)
        # torchvision's soft labels, float32 [N, 10].
        oh = torch.nn.functional.one_hot(m.labels, 10).float()
        want = oh.clone().mul_(m.mix.lam).add_(oh.roll(1, 0).mul_(1.0 - m.mix.lam))
        assert m.soft_labels.dtype == torch.float32 and m.soft_labels.shape == (len(m.labels), 10)
        assert torch.equal(m.soft_labels, want)
        assert torch.allclose(m.soft_labels.sum(1), torch.ones(len(m.labels)))
        own = m.soft_labels[torch.arange(len(m.labels)), m.labels]
        same = m.labels == m.labels.roll(1, 0)
        lam32 = torch.tensor(m.mix.lam, dtype=torch.float32)
        assert torch.equal(own[~same], lam32.expand(int((~same).sum())))
    assert kinds == {"mixup", "cutmix"}


def test_pairs_give_soft_labels(open_dataset):
    ds = open_dataset(augment=PLAIN.format("bf16", "hwc") + ",cutmix=1", batch_size=100)
    n = 0
    for images, soft in ds:
        assert images.dtype == torch.bfloat16 and images.shape[1:] == (32, 32, 3)
        assert soft.dtype == torch.float32 and soft.shape == (len(images), 10)
        n += 1
    assert n == len(ds)


@pytest.mark.parametrize("augment,words", [
    ("crop=32:4,out=u8,mixup=0.2", "float"),
    ("normalize=cifar10,mixup=0.2,flip", "end the chain"),
])
def test_mix_refused(open_dataset, augment, words):
    with pytest.raises(loaderd.Error, match=words):
        next(iter(open_dataset(augment=augment)))


def test_photometric_params(open_dataset):
    ds = open_dataset(augment="crop=32:4,flip,color_jitter=0.4:0.4:0.4:0.1,trivial_augment_wide,random_grayscale=0.3,"
                      "gaussian_blur=3,normalize=cifar10,random_erasing=0.7:0.02-0.33:0.3-3.3:random",
                      include_params=True, batch_size=100)
    erased = gray = 0
    for b in ds.batches():
        p, n = b.params, len(b.indices)
        assert p.jitter_order.shape == (n, 4) and p.jitter.shape == (n, 4) and p.jitter.dtype == torch.float32
        assert (p.jitter_order.sort(1).values == torch.arange(4)).all()
        assert p.gray.shape == (n,) and p.sigma.shape == (n,)
        assert ((0.1 <= p.sigma) & (p.sigma <= 2)).all()
        assert (p.num_ops == 1).all() and len(p.op) == len(p.magnitude) == n
        assert ((0 <= p.op) & (p.op <= 14)).all()
        assert p.erased.shape == (n,) and len(p.erase_noise) == n
        e = p.erased
        assert (p.erase_top[e] + p.erase_height[e] <= 32).all() and (p.erase_left[e] + p.erase_width[e] <= 32).all()
        assert all((k != 0) == bool(x) for k, x in zip(p.erase_noise, e.tolist()))
        erased += int(e.sum())
        gray += int(p.gray.sum())
    assert erased and gray
    plain = next(iter(open_dataset(augment="crop=32:4,flip", include_params=True).batches())).params
    assert plain.jitter is None and plain.erased is None and plain.erase_noise is None


def test_eval_augment_drops_random_ops():
    spec = ("crop=32:4,flip,color_jitter=0.4,grayscale=3,random_grayscale,gaussian_blur=3:0.1-2,"
            "auto_augment=cifar10,rand_augment=2:9,trivial_augment_wide,normalize=cifar10,out=f32,"
            "random_erasing=0.25,mixup=0.2,cutmix=1:0.3")
    assert loaderd.eval_augment(spec, (32, 32, 3)) == "grayscale=3,normalize=cifar10,out=f32"
