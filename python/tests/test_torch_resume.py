"""A run that a torch DataLoader over a shuffling DistributedSampler began
and stopped mid-epoch, continued in loaderd on a dataset served with
?order=torch from the DataLoader's position (docs/PYTORCH.md, "Checkpoints
and resume"; docs/DEPLOY.md, "PyTorch's order"), delivers exactly the
indices the DataLoader had left, in its order."""

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

import loaderd  # noqa: E402
from conftest import Daemon  # noqa: E402

N = 103  # prime: no world or batch size divides it, so padding and short batches show


class Indices(Dataset):
    """A plain map-style dataset of the same length yielding the index."""

    def __len__(self):
        return N

    def __getitem__(self, i):
        return i


@pytest.fixture(scope="module")
def torch_daemon(binary, tmp_path_factory):
    d = Daemon(binary, tmp_path_factory.mktemp("torchorder"), {"t": f"synthetic:{N}?order=torch"})
    d.start()
    yield d
    d.stop()


# (world, rank, seed, epoch, batch_size, drop_last, sampler_drop_last, stop after k batches)
CASES = [
    (1, 0, 0, 0, 8, False, False, 3),
    (1, 0, 42, 5, 10, True, False, 7),
    (2, 0, 7, 1, 8, False, False, 2),
    (2, 1, 7, 1, 8, True, False, 4),
    (3, 2, 123, 3, 5, False, True, 1),
    (4, 1, 2**32 + 5, 2, 4, False, False, 5),
    (4, 3, 9, 0, 6, True, True, 0),
    (5, 4, 1, 7, 3, False, False, 6),
    (2, 0, 11, 4, 16, False, False, 3),  # stop before the short last batch
]


@pytest.mark.parametrize("world,rank,seed,epoch,bs,drop_last,sampler_drop_last,k", CASES)
def test_resume_from_dataloader(torch_daemon, world, rank, seed, epoch, bs, drop_last, sampler_drop_last, k):
    sampler = DistributedSampler(Indices(), num_replicas=world, rank=rank, shuffle=True, seed=seed,
                                 drop_last=sampler_drop_last)
    sampler.set_epoch(epoch)
    dl = DataLoader(Indices(), sampler=sampler, batch_size=bs, drop_last=drop_last)
    batches = [b.tolist() for b in dl]
    assert k < len(batches)
    want = batches[k:]  # what the DataLoader had left after k batches

    ds = loaderd.Dataset(torch_daemon.address, "t", bs, seed=seed, rank=rank, world_size=world,
                         drop_last=drop_last, sampler_drop_last=sampler_drop_last)
    try:
        # The recipe in docs/PYTORCH.md: start at the DataLoader's batch k of epoch e.
        st = ds.state_dict()
        st.update(epoch=epoch, batch=k)
        ds.load_state_dict(st)
        assert len(ds) == len(want)
        got = [b.indices.tolist() for b in ds.batches()]
    finally:
        ds.close()
    assert got == want
    # The whole epoch, for the record: loaderd's batches 0..k-1 are the ones the DataLoader gave.
    ds = loaderd.Dataset(torch_daemon.address, "t", bs, seed=seed, rank=rank, world_size=world,
                         drop_last=drop_last, sampler_drop_last=sampler_drop_last)
    try:
        ds.set_epoch(epoch)
        assert [b.indices.tolist() for b in ds.batches()] == batches
    finally:
        ds.close()


def test_resume_through_a_saved_checkpoint(torch_daemon, tmp_path):
    """The state goes through torch.save/torch.load, as a checkpoint does,
    and the loop after the resumed epoch carries on with the sampler's next
    epoch."""
    world, rank, seed, bs, k, epoch = 3, 1, 5, 7, 2, 1
    sampler = DistributedSampler(Indices(), num_replicas=world, rank=rank, shuffle=True, seed=seed)
    dl = DataLoader(Indices(), sampler=sampler, batch_size=bs)
    want = []
    for e in (epoch, epoch + 1):
        sampler.set_epoch(e)
        b = [x.tolist() for x in dl]
        want += b[k:] if e == epoch else b

    ds = loaderd.Dataset(torch_daemon.address, "t", bs, seed=seed, rank=rank, world_size=world)
    st = ds.state_dict()
    st.update(epoch=epoch, batch=k)
    torch.save({"data": st}, tmp_path / "ck.pt")
    ds.close()

    ds = loaderd.Dataset(torch_daemon.address, "t", bs, seed=seed, rank=rank, world_size=world)
    try:
        ck = torch.load(tmp_path / "ck.pt")
        ds.load_state_dict(ck["data"])
        got = []
        for e in range(ck["data"]["epoch"], epoch + 2):
            ds.set_epoch(e)
            got += [b.indices.tolist() for b in ds.batches()]
    finally:
        ds.close()
    assert got == want


def test_resume_sweep(torch_daemon):
    """Many more (world, rank, seed, epoch, batch size, drop_lasts, stop
    step), drawn from a fixed generator; every stop step of each."""
    import random
    rnd = random.Random(28)
    for _ in range(25):
        world = rnd.choice([1, 2, 3, 4, 6, 8])
        rank = rnd.randrange(world)
        seed, epoch, bs = rnd.randrange(2**33), rnd.randrange(10), rnd.choice([1, 2, 5, 8, 13, 32])
        drop_last, sampler_drop_last = rnd.random() < 0.5, rnd.random() < 0.5
        sampler = DistributedSampler(Indices(), num_replicas=world, rank=rank, shuffle=True, seed=seed,
                                     drop_last=sampler_drop_last)
        sampler.set_epoch(epoch)
        batches = [b.tolist() for b in DataLoader(Indices(), sampler=sampler, batch_size=bs, drop_last=drop_last)]
        ds = loaderd.Dataset(torch_daemon.address, "t", bs, seed=seed, rank=rank, world_size=world,
                             drop_last=drop_last, sampler_drop_last=sampler_drop_last)
        try:
            for k in range(len(batches)):
                st = ds.state_dict()
                st.update(epoch=epoch, batch=k)
                ds.load_state_dict(st)
                got = [b.indices.tolist() for b in ds.batches()]
                assert got == batches[k:], (world, rank, seed, epoch, bs, drop_last, sampler_drop_last, k)
        finally:
            ds.close()


def test_resume_at_the_end_of_an_epoch(torch_daemon):
    """A DataLoader stopped after its epoch's last batch: nothing of that
    epoch is left. The recipe's (e, k) with k = len(DataLoader) yields
    nothing (len(ds) says 0), and the next loop starts epoch e + 1, as
    state_dict() says after a finished epoch."""
    bs, epoch = 10, 2
    ds = loaderd.Dataset(torch_daemon.address, "t", bs, seed=1)
    try:
        st = ds.state_dict()
        st.update(epoch=epoch, batch=-(-N // bs))
        ds.load_state_dict(st)
        assert len(ds) == 0
        assert [b.indices.tolist() for b in ds.batches()] == []
        assert (ds.state_dict()["epoch"], ds.state_dict()["batch"]) == (epoch + 1, 0)
        assert len(ds) == ds.batches_per_epoch()
    finally:
        ds.close()
