"""Elastic resume in the Python client: a run checkpointed under world size
W mid-epoch finishes the epoch under W' (docs/RESUME.md)."""

import collections

import pytest

from conftest import N_ODD

AUG = "crop=32:4,flip=0.5,out=u8:chw"
EPOCH = 1


def collect(batches, out):
    for b in batches:
        for k, i in enumerate(b.indices.tolist()):
            out.append((i, int(b.labels[k]), int(b.params.top[k]), int(b.params.left[k]), bool(b.params.flip[k]),
                        b.images[k].numpy().tobytes()))


@pytest.fixture(scope="module")
def reference(daemon):
    """Epoch 1 of the odd-sized dataset from one uninterrupted rank: the
    order, and each index's label, crop, flip and pixels."""
    import loaderd
    with loaderd.Dataset(daemon.address, "odd", 59, seed=3, augment=AUG, include_params=True) as ds:
        ds.set_epoch(EPOCH)
        out = []
        collect(ds.batches(), out)
    assert len(out) == N_ODD
    return [s[0] for s in out], {s[0]: s[1:] for s in out}


@pytest.mark.parametrize("w,w2", [(4, 2), (2, 3), (3, 1), (1, 4)])
@pytest.mark.parametrize("stop", ["early", "middle", "last"])
def test_elastic_resume(open_dataset, reference, w, w2, stop):
    order, by_index = reference
    bs, bs2 = 16, 24
    per_rank = -(-N_ODD // w)
    k = {"early": 1, "middle": per_rank // bs // 2, "last": -(-per_rank // bs) - 1}[stop]
    got, states = [], []
    for r in range(w):
        ds = open_dataset("odd", bs, rank=r, world_size=w, augment=AUG, include_params=True)
        ds.set_epoch(EPOCH)
        it = ds.batches()
        collect((next(it) for _ in range(k)), got)
        it.close()
        st = ds.state_dict()
        assert (st["epoch"], st["batch"], st["offset"]) == (EPOCH, k, 0)
        assert ds.global_position == (EPOCH, k * bs * w)
        states.append(st)
    g = k * bs * w
    for r in range(w2):
        ds = open_dataset("odd", bs2, rank=r, world_size=w2, augment=AUG, include_params=True)
        # Every rank's states, or rank 0's alone: the same resume point.
        ds.load_state_dict(states if r % 2 == 0 else states[0])
        assert ds.epoch == EPOCH and ds.offset == g and ds.position == (EPOCH, 0)
        n, announced, delivered = len(got), len(ds), []
        collect((delivered.append(b) or b for b in ds.batches()), got)
        assert len(delivered) == announced, f"len(ds) said {announced} batches, the loop gave {len(delivered)}"
        assert len(ds) == ds.batches_per_epoch()  # the next loop is a whole epoch
        assert ds.position == (EPOCH + 1, 0) and ds.offset == 0
        assert len(got) > n or g >= N_ODD - r
    rest = N_ODD - g
    pad = -(-rest // w2) * w2 - rest
    counts = collections.Counter(s[0] for s in got)
    want = collections.Counter(order) + collections.Counter(order[:pad])
    assert counts == want, f"resumed at {g}: {len(got)} samples, want {N_ODD} + {pad} of padding"
    for i, *rest_ in got:
        assert tuple(rest_) == by_index[i], f"index {i}: label/crop/flip/pixels differ from the uninterrupted run"


def test_mid_resume_state_and_repeated_resume(open_dataset, reference):
    """A state saved mid-way through a resumed epoch carries the offset;
    resuming it under a third world completes the epoch exactly."""
    order, _ = reference
    got, states = [], []
    for r in range(4):
        ds = open_dataset("odd", 16, rank=r, world_size=4, augment=AUG, include_params=True)
        ds.set_epoch(EPOCH)
        it = ds.batches()
        collect((next(it) for _ in range(3)), got)
        it.close()
        states.append(ds.state_dict())
    states2 = []
    for r in range(2):
        ds = open_dataset("odd", 32, rank=r, world_size=2, augment=AUG, include_params=True)
        ds.load_state_dict(states)
        it = ds.batches()
        collect((next(it) for _ in range(4)), got)
        it.close()
        st = ds.state_dict()
        assert (st["epoch"], st["batch"], st["offset"]) == (EPOCH, 4, 3 * 16 * 4)
        states2.append(st)
    for r in range(3):
        ds = open_dataset("odd", 16, rank=r, world_size=3, augment=AUG, include_params=True)
        ds.load_state_dict(states2)
        assert ds.offset == 3 * 16 * 4 + 4 * 32 * 2
        collect(ds.batches(), got)
    rest = N_ODD - (3 * 16 * 4 + 4 * 32 * 2)
    pad = -(-rest // 3) * 3 - rest
    assert collections.Counter(s[0] for s in got) == collections.Counter(order) + collections.Counter(order[:pad])


def test_disagreeing_states_are_refused(open_dataset):
    states = []
    for r, k in ((0, 2), (1, 3)):
        ds = open_dataset("odd", 16, rank=r, world_size=2)
        it = ds.batches()
        for _ in range(k):
            next(it)
        it.close()
        states.append(ds.state_dict())
    with pytest.raises(ValueError, match="disagree"):
        open_dataset("odd", 16, world_size=3).load_state_dict(states)
    with pytest.raises(ValueError, match="disagree"):
        open_dataset("odd", 16, world_size=3).load_state_dict(states[:1])  # a list must hold every rank's
    with pytest.raises(ValueError, match="seed"):
        open_dataset("odd", 16, seed=4, world_size=3).load_state_dict(states[0])


@pytest.mark.parametrize("bad,why", [
    ({"world_size": 0}, "world_size 0: want >= 1"),
    ({"world_size": -2}, "world_size -2: want >= 1"),
    ({"rank": 2, "world_size": 2}, "rank 2 outside its world_size 2"),
    ({"rank": -1}, "rank -1 outside its world_size 1"),
    ({"batch_size": 0}, "batch_size 0: want 1..16384"),
    ({"world_size": 1.5}, "world_size is 1.5: want an integer"),
    ({"world_size": None}, "world_size is None: want an integer"),
])
def test_states_outside_any_world_are_refused(bad, why):
    """A state whose world, rank or batch size no Dataset could have saved
    (issue 29: world_size=0 used to be accepted, and resumed at the epoch's
    start) raises ValueError, alone or in a list, and leaves the dataset's
    position where it was. No daemon is needed: loading does not dial."""
    import loaderd

    ds = loaderd.Dataset("unix:///nonexistent/loaderd.sock", "odd", 16, seed=3, connect_timeout=0)
    good = ds.state_dict()
    good.update(epoch=2, batch=5)
    ds.load_state_dict(good)
    assert ds.position == (2, 5)
    for state in (dict(good, **bad), [dict(good, **bad)]):
        with pytest.raises(ValueError, match=why):
            ds.load_state_dict(state)
        assert ds.position == (2, 5)
    assert ds.state_dict() == good


def test_constructor_refuses_worlds_outside_range(monkeypatch):
    import loaderd

    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    for rank, world, why in ((0, 0, "rank 0 of world size 0"), (None, 0, "rank 0 of world size 0"),
                             (3, 2, "rank 3 of world size 2"), (-1, 2, "rank -1 of world size 2")):
        with pytest.raises(ValueError, match=why):
            loaderd.Dataset("unix:///nonexistent/loaderd.sock", "odd", 16, rank=rank, world_size=world)
    monkeypatch.setenv("WORLD_SIZE", "0")
    with pytest.raises(ValueError, match="world size 0"):
        loaderd.Dataset("unix:///nonexistent/loaderd.sock", "odd", 16)
