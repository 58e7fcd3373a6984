"""A daemon restart mid-epoch: the client resumes with no batch lost or repeated."""

import torch

import loaderd
from conftest import Daemon


def test_resumes_after_a_daemon_restart(binary, data, tmp_path):
    path, _, _ = data["c10"]
    d = Daemon(binary, tmp_path, {"c10": f"cifar:{path}"})
    d.start()
    try:
        want = [(b.epoch, b.index, b.indices.tolist(), b.images.clone())
                for b in loaderd.Dataset(d.address, "c10", 64, seed=9, epochs=2).batches(None)]
        ds = loaderd.Dataset(d.address, "c10", 64, seed=9, epochs=2, reconnect_wait=30)
        got = []
        for b in ds.batches(None):
            got.append((b.epoch, b.index, b.indices.tolist(), b.images.clone()))
            if len(got) == 5:
                d.stop()   # SIGTERM: streams end with UNAVAILABLE
                d.start()  # same socket; the client waits for it
        assert [g[:3] for g in got] == [w[:3] for w in want]
        differ = [k for k, (g, w) in enumerate(zip(got, want)) if not torch.equal(g[3], w[3])]
        assert differ == [], f"batches {differ} of {len(got)} differ (stopped after batch 4)"
        ds.close()
    finally:
        d.stop()
