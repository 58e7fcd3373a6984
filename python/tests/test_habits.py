"""DataLoader's habits, honoured: evaluation datasets, independent
iterators, peeking, and batches that keep their data and never see another
batch's writes."""

import numpy as np
import pytest
import torch

import loaderd
from conftest import N
from test_parity import reference


def source_chw(images, indices):
    return images[indices.numpy()].transpose(0, 3, 1, 2)


# -- evaluation ---------------------------------------------------------------

def test_eval_augment_drops_crop_and_flip_only():
    assert loaderd.eval_augment("crop=32:4,flip=0.5,normalize=cifar10,out=f32:chw", (32, 32, 3)) == \
        "normalize=cifar10,out=f32:chw"
    assert loaderd.eval_augment("flip,totensor,out=bf16:hwc") == "totensor,out=bf16:hwc"
    assert loaderd.eval_augment("out=f32:chw", (28, 28, 1)) == "out=f32:chw"
    # Random crops to a smaller size become the deterministic torchvision test transforms.
    assert loaderd.eval_augment("crop=24:0,normalize=imagenet", (32, 32, 3)) == "center_crop=24,normalize=imagenet"
    assert loaderd.eval_augment("random_resized_crop=224:0.08-1,flip,normalize=imagenet,out=f16", (256, 256, 3)) == \
        "resize=256,center_crop=224,normalize=imagenet,out=f16"
    assert loaderd.eval_augment("resize=256,center_crop=224,normalize=imagenet") == \
        "resize=256,center_crop=224,normalize=imagenet"


@pytest.mark.parametrize("make", ["train_false", "classmethod"])
def test_eval_dataset_is_unshuffled_unaugmented_and_normalised(open_dataset, daemon, data, make):
    _, images, labels = data["c10"]
    if make == "train_false":
        ds = open_dataset(batch_size=100, train=False, include_params=True)
    else:
        ds = loaderd.Dataset.eval(daemon.address, "c10", 100, include_params=True)
    assert (ds.shuffle, ds.spec()) == (False, "normalize=cifar10,out=f32:chw")
    order = []
    for b in ds.batches():
        assert b.params is not None and not b.params.flip.any()
        want = torch.stack([reference(images[i]) for i in b.indices.tolist()])
        assert (b.images - want).abs().max().item() <= 1e-6  # ToTensor + Normalize, nothing else
        assert b.labels.tolist() == labels[b.indices.numpy()].tolist()
        order += b.indices.tolist()
    assert order == list(range(N))
    if make == "classmethod":
        ds.close()


def test_eval_dataset_keeps_explicit_choices(open_dataset):
    ds = open_dataset(train=False, shuffle=True, augment="out=u8")
    assert ds.shuffle and ds.spec() == "out=u8"
    assert [i for b in ds.batches() for i in b.indices.tolist()] != list(range(N))


# -- iterators ----------------------------------------------------------------

def test_indexing_takes_ints_and_says_so(open_dataset):
    ds = open_dataset()
    img, label = ds[3]  # map-style access (test_getitem.py)
    assert tuple(img.shape) == (3, 32, 32) and isinstance(label, int)
    with pytest.raises(TypeError, match=r"index 'a': ds\[i\] takes an int.*iterate the dataset"):
        ds["a"]


def test_a_second_iterator_is_independent(open_dataset):
    ds = open_dataset(augment="out=u8")
    pairs = list(zip(ds, ds))  # zip used to stop the first at once
    assert len(pairs) == len(ds)
    for (a, la), (b, lb) in pairs:
        assert torch.equal(la, lb) and torch.equal(a, b)
    nested = 0
    ds.set_epoch(0)
    for k, (_, outer) in enumerate(ds):  # a nested loop runs whole passes and leaves the outer one alone
        if k < 2:
            nested += sum(len(lab) for _, lab in ds)
    assert nested == 2 * N


def test_peeking_does_not_eat_a_batch(open_dataset):
    """next(iter(ds)) to look at shapes used to cost the loop that followed
    a batch (9,500 of 10,000 samples)."""
    ds = open_dataset(train=False, batch_size=100)
    images, labels = next(iter(ds))
    assert images.shape == (100, 3, 32, 32)
    assert sum(len(lab) for _, lab in ds) == N
    assert sum(len(lab) for _, lab in ds) == N  # and the next epoch too


def test_leaving_a_loop_early_restarts_the_epoch_but_state_dict_resumes(open_dataset):
    ds = open_dataset(epochs=2)
    first = [b.indices.tolist() for b in ds.batches()]
    ds.set_epoch(0)
    for k, _ in enumerate(ds):
        if k == 4:
            break
    state = ds.state_dict()
    assert (state["epoch"], state["batch"]) == (0, 5)
    assert ds.epoch == 0  # the next loop serves epoch 0 again, from its start
    assert [b.indices.tolist() for b in ds.batches()] == first
    other = open_dataset(epochs=2)
    other.load_state_dict(state)
    assert [b.indices.tolist() for b in other.batches()] == first[5:]  # the resume point
    assert other.position == (1, 0)


def test_set_epoch_keeps_a_loaded_resume_point(open_dataset):
    state = dict(open_dataset().state_dict(), epoch=1, batch=3)
    ds = open_dataset()
    ds.load_state_dict(state)
    ds.set_epoch(1)  # the usual loop top: must not lose the mid-epoch resume
    assert [b.index for b in ds.batches()][0] == 3
    ds.load_state_dict(state)
    ds.set_epoch(2)  # another epoch: from its start
    assert [b.index for b in ds.batches()][0] == 0


def test_old_state_dicts_load(open_dataset):
    """A state saved by loaderd 0.1, whose drop_last was the sampler's."""
    ds = open_dataset(sampler_drop_last=True)
    old = {"dataset": "c10", "seed": 3, "rank": 0, "world_size": 1, "batch_size": 64, "shuffle": True,
           "drop_last": True, "drop_last_batch": False, "epoch": 0, "batch": 2}
    ds.load_state_dict(old)
    assert ds.position == (0, 2)
    with pytest.raises(ValueError, match="sampler_drop_last"):
        open_dataset().load_state_dict(old)


# -- memory: data never changes under its holder, writes never travel ---------

@pytest.mark.parametrize("transport", ["shm", "inline"])
@pytest.mark.parametrize("how", ["held", "released", "numpy"])
def test_writes_into_a_batch_never_reach_a_later_one(open_dataset, data, transport, how):
    """An in-place op on a yielded batch (held, or after its release) and
    writes through numpy: every later batch still equals its source
    records, over two epochs (each slot reused many times)."""
    _, images, _ = data["c10"]
    ds = open_dataset(augment="out=u8", transport=transport, batch_size=50, prefetch=2, epochs=2)
    prev = None
    n = 0
    for b in ds.batches(None):
        assert np.array_equal(b.images.numpy(), source_chw(images, b.indices)), f"batch {b.epoch}.{b.index}"
        if how == "held":
            b.images.fill_(255)
        elif how == "numpy":
            b.images.numpy()[:] = 7
        elif prev is not None:
            prev.add_(1)  # a released batch's view, written after its release
        prev = b.images
        n += 1
    assert n == 2 * (N // 50)


@pytest.mark.parametrize("transport", ["shm", "inline"])
def test_kept_images_keep_their_data(open_dataset, data, daemon, transport):
    """Keeping images without clone(): they keep their own data, through
    the epoch, the stream's end and the daemon reusing the memory."""
    _, images, _ = data["c10"]
    ds = open_dataset(augment="out=u8", transport=transport, batch_size=100, prefetch=1)
    kept = [(imgs, b_idx) for imgs, b_idx in ((b.images, b.indices) for b in ds.batches())]
    ds.close()
    daemon.wait_metrics(loaderd_streams=0, loaderd_slots_leased=0)
    busy = open_dataset(augment="crop=32:4,flip,out=u8", transport=transport, batch_size=100)
    for _ in busy:  # another stream rewrites the daemon's memory
        pass
    for imgs, idx in kept:
        assert np.array_equal(imgs.numpy(), source_chw(images, idx))


def test_shared_memory_comes_over_the_fd_socket_on_unix_and_the_path_on_tcp(open_dataset, daemon):
    for address, want in ((daemon.address, daemon.sock + ".fd"), (daemon.tcp, "/proc/")):
        ds = open_dataset(address=address)
        it = ds.batches()
        next(it)
        via = it._session.region.via
        assert via.startswith(want), via
        it.close()
