"""A dataset drawn with replacement (sampler=balanced&samples=K, K != N):
the Python client sizes its epochs by the K draws, before and after a
resume, and a loop delivers exactly that many samples."""
import pytest

torch = pytest.importorskip("torch")

import loaderd  # noqa: E402
from conftest import Daemon  # noqa: E402

N, K = 40, 61


@pytest.fixture(scope="module")
def weighted_daemon(binary, tmp_path_factory):
    d = Daemon(binary, tmp_path_factory.mktemp("weighted"), {"w": f"synthetic:{N}?sampler=balanced&samples={K}"})
    d.start()
    yield d
    d.stop()


@pytest.mark.parametrize("world,rank", [(1, 0), (3, 1)])
def test_epoch_is_the_draws(weighted_daemon, world, rank):
    ds = loaderd.Dataset(weighted_daemon.address, "w", 4, rank=rank, world_size=world, seed=2)
    try:
        assert ds.info().size == N and ds.info().epoch_samples == K
        per = -(-K // world)
        assert ds.samples_per_epoch() == per
        assert len(ds) == -(-per // 4)
        got = sum(len(b.indices) for b in ds.batches())
        assert got == per
        st = ds.state_dict()
        st.update(epoch=0, batch=2)
        ds.load_state_dict(st)
        assert len(ds) == -(-per // 4) - 2
        left = len(ds)
        assert sum(1 for _ in ds.batches()) == left
    finally:
        ds.close()
