"""loaderd.Dataset against a real daemon: contents, sharding, resumption,
memory release, configuration."""

import gc
import math
import warnings

import numpy as np
import pytest
import torch

import loaderd
from conftest import N, N_ODD


def run(ds, epochs=1):
    """Every batch of epochs epochs as plain values, images cloned."""
    return [(b.epoch, b.index, b.indices.tolist(), b.labels.tolist(), b.images.clone())
            for b in ds.batches(epochs)]


def test_list_datasets(daemon):
    infos = {d.name: d for d in loaderd.list_datasets(daemon.address)}
    assert sorted(infos) == ["big", "c10", "exit", "odd"]
    c10 = infos["c10"]
    assert (c10.format, c10.size, c10.shape, c10.layout) == ("cifar", N, (32, 32, 3), "chw")
    assert c10.classes == list(loaderd.cifar.CLASSES)
    assert "normalize=cifar10" in c10.default_augment
    assert infos["odd"].size == N_ODD


@pytest.mark.parametrize("transport", ["shm", "inline"])
@pytest.mark.parametrize("address", ["unix", "tcp"])
def test_u8_batches_are_the_source_records(open_dataset, daemon, data, transport, address):
    _, images, labels = data["c10"]
    addr = daemon.address if address == "unix" else daemon.tcp
    ds = open_dataset(augment="out=u8:chw", transport=transport, address=addr)
    counts = np.zeros(N, dtype=int)
    sizes = []
    for k, b in enumerate(ds.batches()):
        # Checked while held: the images are a view the next batch may reuse.
        assert (b.epoch, b.index) == (0, k)
        assert b.images.dtype == torch.uint8 and b.images.shape == (len(b.indices), 3, 32, 32)
        idx = b.indices.numpy()
        assert b.labels.dtype == torch.int64 and b.labels.tolist() == labels[idx].tolist()
        assert np.array_equal(b.images.numpy(), images[idx].transpose(0, 3, 1, 2))
        counts[idx] += 1
        sizes.append(len(idx))
    assert len(sizes) == len(ds) == math.ceil(N / 64)
    assert (counts == 1).all()  # one epoch is a permutation of the dataset
    assert sizes[-2:] == [64, N % 64]


@pytest.mark.parametrize("dtype,torch_dtype", [("f32", torch.float32), ("f16", torch.float16),
                                               ("bf16", torch.bfloat16), (torch.float16, torch.float16)])
def test_dtypes_and_pairs(open_dataset, data, dtype, torch_dtype):
    _, _, labels = data["c10"]
    ds = open_dataset(dtype=dtype, batch_size=128)
    n = 0
    for images, lab in ds:
        assert images.dtype == torch_dtype and images.shape == (len(lab), 3, 32, 32)
        assert lab.dtype == torch.int64
        n += len(lab)
    assert n == N


@pytest.mark.parametrize("name,n,drop_last", [("c10", N, False), ("odd", N_ODD, False), ("odd", N_ODD, True)])
def test_world_4_ranks_are_disjoint_and_complete(open_dataset, name, n, drop_last):
    per_rank = []
    for rank in range(4):
        ds = open_dataset(name, batch_size=32, rank=rank, world_size=4, sampler_drop_last=drop_last, augment="out=u8")
        idx = [i for b in ds.batches() for i in b.indices.tolist()]
        # DistributedSampler's count: pad up, or drop the tail.
        assert len(idx) == ds.samples_per_epoch() == (n // 4 if drop_last else math.ceil(n / 4))
        per_rank.append(idx)
    flat = [i for r in per_rank for i in r]
    if n % 4 == 0 or drop_last:
        assert len(set(flat)) == len(flat)  # disjoint
    else:
        assert len(flat) - len(set(flat)) == 4 - n % 4  # only the padding repeats
    if drop_last:
        assert len(set(flat)) == n - n % 4
    else:
        assert set(flat) == set(range(n))  # complete


def test_same_seed_same_batches_and_epochs_reshuffle(open_dataset):
    a, b = open_dataset(seed=11), open_dataset(seed=11)
    ra, rb = run(a, 2), run(b, 2)
    assert [x[:4] for x in ra] == [x[:4] for x in rb]
    assert all(torch.equal(x[4], y[4]) for x, y in zip(ra, rb))
    per_epoch = {e: [i for x in ra if x[0] == e for i in x[2]] for e in (0, 1)}
    assert sorted(per_epoch[0]) == sorted(per_epoch[1]) == list(range(N))
    assert per_epoch[0] != per_epoch[1]
    other = run(open_dataset(seed=12))
    assert [x[2] for x in other] != [x[2] for x in ra if x[0] == 0]


def test_epoch_loop_with_set_epoch_and_without(open_dataset):
    explicit, implicit = open_dataset(), open_dataset()
    seen_e, seen_i = [], []
    for epoch in range(3):
        explicit.set_epoch(epoch)
        seen_e.append([lab.tolist() for _, lab in explicit])
        seen_i.append([lab.tolist() for _, lab in implicit])  # the position moves on by itself
        assert explicit.position == implicit.position == (epoch + 1, 0)
    assert seen_e == seen_i
    explicit.set_epoch(1)
    assert [lab.tolist() for _, lab in explicit] == seen_e[1]


def test_epochs_limit_ends_the_stream(open_dataset, daemon):
    ds = open_dataset(epochs=2)
    assert len(run(ds)) == len(ds)
    assert len(run(ds)) == len(ds)
    daemon.wait_metrics(loaderd_streams=0)  # the last epoch closed it
    assert run(ds) == [] and ds.position == (2, 0)


@pytest.mark.parametrize("transport", ["shm", "inline"])
@pytest.mark.parametrize("stop_at", [(0, 5), (1, 3), (1, 0)])
def test_state_dict_resume_gives_exactly_the_remaining_batches(open_dataset, transport, stop_at):
    whole = run(open_dataset(epochs=2, transport=transport), None)
    assert len(whole) == 2 * math.ceil(N / 64)
    first = open_dataset(epochs=2, transport=transport)
    it = first.batches(None)
    taken = 0
    for b in it:
        taken += 1
        if (b.epoch, b.index + 1) == stop_at or (b.epoch + 1, 0) == stop_at and b.index == len(first) - 1:
            break
    state = first.state_dict()
    assert (state["epoch"], state["batch"]) == stop_at
    it.close()
    first.close()

    resumed = open_dataset(epochs=2, transport=transport)
    resumed.load_state_dict(state)
    assert len(resumed) == math.ceil(N / 64) - stop_at[1]  # what the next loop yields
    assert resumed.batches_per_epoch() == math.ceil(N / 64)
    rest = run(resumed, None)
    assert len(rest) == len(whole) - taken
    for got, want in zip(rest, whole[taken:]):
        assert got[:4] == want[:4]
        assert torch.equal(got[4], want[4])


def test_load_state_dict_refuses_another_plan(open_dataset):
    state = open_dataset(seed=1).state_dict()
    with pytest.raises(ValueError, match="seed"):
        open_dataset(seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="shuffle"):
        open_dataset(seed=1, shuffle=False).load_state_dict(state)
    # Another world size is an elastic resume (test_elastic.py), not a refusal.
    open_dataset(seed=1, rank=0, world_size=2).load_state_dict(state)


@pytest.mark.parametrize("how", ["del", "break", "close", "new_iterator", "dataset_gc"])
def test_dropping_the_iterator_releases_its_slots(open_dataset, daemon, how):
    daemon.wait_metrics(loaderd_streams=0, loaderd_slots_leased=0)
    ds = open_dataset(prefetch=3)
    it = iter(ds)
    images, _ = next(it)
    m = daemon.wait_metrics(loaderd_streams=1)
    assert m["loaderd_slots_leased"] > 0
    if how == "del":
        del it, images
    elif how == "break":
        del it
        for _ in ds:
            break
    elif how == "close":
        it.close()
    elif how == "new_iterator":
        it2 = iter(ds)
        next(it2)
        daemon.wait_metrics(loaderd_streams=2)  # independent: both stream
        del it, it2
    elif how == "dataset_gc":
        del it, ds
        gc.collect()
    daemon.wait_metrics(loaderd_streams=0, loaderd_slots_leased=0, loaderd_batches_in_flight=0)


def test_finished_epoch_keeps_the_stream_for_the_next_until_close(open_dataset, daemon):
    ds = open_dataset()
    assert len(run(ds)) == len(ds)
    daemon.wait_metrics(loaderd_streams=1)  # prefetching epoch 1
    ds.close()
    daemon.wait_metrics(loaderd_streams=0, loaderd_slots_leased=0)
    assert run(ds)[0][:2] == (1, 0)  # reconnects where it was


@pytest.mark.parametrize("transport", ["shm", "inline"])
@pytest.mark.parametrize("hold", [1, 3])
def test_hold_releases_the_older_batches_and_kept_ones_keep_their_data(open_dataset, transport, hold):
    ds = open_dataset(hold=hold, augment="out=u8", prefetch=1, transport=transport)
    held, copies = [], []
    for b in ds.batches():
        held.append(b)  # kept past their release, without clone()
        copies.append(b.images.clone())
        live = [k for k, x in enumerate(held) if not x.released]
        assert live == list(range(len(held)))[-hold:]
        for k, x in enumerate(held):
            assert torch.equal(x.images, copies[k])  # released or not, still its own bytes
    assert all(x.released for x in held)  # the epoch's end released the rest
    ds.close()
    assert all(torch.equal(x.images, c) for x, c in zip(held, copies))  # and after the stream ended


def test_release_early_and_writable_views(open_dataset, data):
    _, images, _ = data["c10"]
    ds = open_dataset(augment="out=u8", hold=2)
    it = ds.batches()
    a = next(it)
    a.images.zero_()  # in place: private to this process
    assert a.images.sum().item() == 0
    a.release()
    a.release()  # idempotent
    b = next(it)
    assert np.array_equal(b.images.numpy(), images[b.indices.numpy()].transpose(0, 3, 1, 2))
    it.close()


def test_drop_last_means_what_it_means_for_dataloader(open_dataset):
    """drop_last skips the short last batch, as DataLoader's does (the
    issue: drop_last=True gave 196 batches where DataLoader gives 195)."""
    keep, drop = open_dataset("odd", batch_size=100), open_dataset("odd", batch_size=100, drop_last=True)
    want = [len(x) for x in torch.utils.data.DataLoader(range(N_ODD), batch_size=100, drop_last=True)]
    assert (len(keep), len(drop)) == (11, len(want)) == (11, 10)
    assert [len(b.indices) for b in keep.batches()][-1] == N_ODD % 100
    assert [len(b.indices) for b in drop.batches()] == want
    # The old keyword is refused with what to write instead.
    with pytest.raises(TypeError, match="sampler_drop_last"):
        open_dataset("odd", batch_size=100, drop_last_batch=True)


def test_sampler_drop_last_is_distributedsamplers(open_dataset):
    for flag in (False, True):
        ds = open_dataset("odd", batch_size=50, rank=1, world_size=4, sampler_drop_last=flag, shuffle=False,
                          augment="out=u8")
        sampler = torch.utils.data.DistributedSampler(range(N_ODD), num_replicas=4, rank=1, shuffle=False,
                                                      drop_last=flag)
        assert [i for b in ds.batches() for i in b.indices.tolist()] == list(sampler)
        assert ds.samples_per_epoch() == len(sampler)


def test_dataloader_with_batch_size_none(open_dataset):
    ds = open_dataset(augment="out=u8", seed=5)
    want = [lab.tolist() for _, lab in ds]
    ds.set_epoch(0)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    assert [lab.tolist() for _, lab in dl] == want


def test_dataloader_with_its_default_batch_size_is_refused(open_dataset):
    """DataLoader(ds) would stack each batch into [1, N, C, H, W]."""
    ds = open_dataset()
    for dl in (torch.utils.data.DataLoader(ds), torch.utils.data.DataLoader(ds, batch_size=4)):
        with pytest.raises(loaderd.Error, match="batch_size=None"):
            next(iter(dl))


def test_dataloader_workers_are_refused(open_dataset):
    dl = torch.utils.data.DataLoader(open_dataset(), batch_size=None, num_workers=1)
    with pytest.raises(loaderd.Error, match="main process"):
        next(iter(dl))


def test_rank_and_world_from_the_environment(open_dataset, monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    assert (open_dataset().rank, open_dataset().world_size) == (0, 1)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert (open_dataset().rank, open_dataset().world_size) == (1, 2)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    ds = open_dataset()
    assert (ds.rank, ds.world_size) == (3, 4)
    assert (open_dataset(rank=1).rank, loaderd.local_rank()) == (1, 1)
    assert len(run(ds)) == math.ceil(N / 4 / 64)
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match="rank 4 of world size 4"):
        open_dataset()


def test_errors_carry_the_status_code(open_dataset):
    import grpc

    with pytest.raises(loaderd.Error) as e:
        next(iter(open_dataset("nope")))
    assert e.value.code == grpc.StatusCode.NOT_FOUND and "nope" in str(e.value)
    with pytest.raises(loaderd.Error) as e:
        next(iter(open_dataset(augment="crop=bogus")))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(loaderd.Error) as e:
        next(iter(open_dataset(augment="normalize=cifar10,out=f32", dtype="u8")))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(ValueError):
        open_dataset(transport="carrier-pigeon")


def test_pin(open_dataset):
    """pin=True registers the region with CUDA; without CUDA it warns and
    the batches are the same."""
    plain = run(open_dataset(augment="out=u8"))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ds = open_dataset(augment="out=u8", pin=True)
        pinned = run(ds)
    if torch.cuda.is_available():
        assert not [x for x in w if "pin=True" in str(x.message)]
    else:
        assert any("CUDA is not available" in str(x.message) for x in w)
    assert [x[:4] for x in pinned] == [x[:4] for x in plain]
    assert all(torch.equal(a[4], b[4]) for a, b in zip(pinned, plain))


def test_a_kept_view_keeps_its_mapping_until_it_is_garbage(open_dataset, daemon):
    def mappings():
        with open("/proc/self/maps") as f:
            return sum("loaderd-stream" in line for line in f)

    gc.collect()
    before = mappings()
    ds = open_dataset(augment="out=u8")
    it = ds.batches()
    view = next(it).images
    copy = view.clone()
    assert mappings() > before
    it.close()
    ds.close()
    daemon.wait_metrics(loaderd_streams=0, loaderd_slots_leased=0)  # the daemon has the slot back
    gc.collect()
    assert mappings() == before + 1  # this batch's, detached: reading it cannot crash
    assert torch.equal(view, copy)
    del view
    gc.collect()
    assert mappings() == before
