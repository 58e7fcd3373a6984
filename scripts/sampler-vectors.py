#!/usr/bin/python3
"""Write sampler/testdata/distributed-vectors.json: what PyTorch's own
torch.utils.data.DistributedSampler yields, the oracle of
sampler/distributed_test.go.

    /usr/bin/python3 scripts/sampler-vectors.py [OUT]

Needs Debian's python3-torch, so run it with /usr/bin/python3
(scripts/python-setup.sh installs it). The output is deterministic: rerun
it after changing the tables below and commit the file it writes.

loaderd's shuffled order is its own permutation, not torch's randperm; what
it shares with torch is how an epoch's order is padded (wrapping around to
total_size) or cut (drop_last) and split (rank r takes every world-th entry
from r). So the vectors hold:

  identity   shuffle=False over range(N), for every (N, world, drop_last) of
             the Go tests' tables: each rank's list is the positions of the
             epoch order it takes; the Go test maps them through any order.
             set_epoch(0..2) is checked to change nothing.
  shuffled   shuffle=True (seed SEED, epochs 0..2): torch's own epoch order
             (world 1 yields it unpadded) and each rank's list for a few
             worlds, so the same split is also pinned on a non-identity
             order.
"""

import json
import os
import sys

import torch
from torch.utils.data import DistributedSampler

# Keep in step with propNs and propWorlds in sampler/distributed_test.go.
NS = [1, 2, 3, 4, 5, 7, 8, 10, 16, 17, 31, 64, 100, 257]
WORLDS = [1, 2, 3, 4, 5, 7, 8, 16, 33]
EPOCHS = [0, 1, 2]

SHUFFLED_NS = [3, 10, 17]
SHUFFLED_WORLDS = [2, 4, 8]
SEED = 7


def lists(n, world, drop_last, shuffle, epoch, seed=0):
    """Every rank's index list for one epoch, and num_samples/total_size."""
    out, sizes = [], set()
    for rank in range(world):
        s = DistributedSampler(range(n), num_replicas=world, rank=rank,
                               shuffle=shuffle, seed=seed, drop_last=drop_last)
        s.set_epoch(epoch)
        idx = [int(i) for i in s]
        assert len(idx) == len(s) == s.num_samples, (n, world, rank)
        out.append(idx)
        sizes.add((s.num_samples, s.total_size))
    assert len(sizes) == 1
    return out, sizes.pop()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "sampler", "testdata", "distributed-vectors.json")

    identity = []
    for n in NS:
        for world in WORLDS:
            for drop in (False, True):
                ranks, (num, total) = lists(n, world, drop, False, EPOCHS[0])
                for e in EPOCHS[1:]:
                    assert lists(n, world, drop, False, e)[0] == ranks
                identity.append({"n": n, "world": world, "drop_last": drop,
                                 "num_samples": num, "total_size": total,
                                 "ranks": ranks})

    shuffled = []
    for n in SHUFFLED_NS:
        for e in EPOCHS:
            (order,), _ = lists(n, 1, False, True, e, SEED)
            cases = []
            for world in SHUFFLED_WORLDS:
                for drop in (False, True):
                    ranks, _ = lists(n, world, drop, True, e, SEED)
                    cases.append({"world": world, "drop_last": drop, "ranks": ranks})
            shuffled.append({"n": n, "seed": SEED, "epoch": e, "order": order,
                             "cases": cases})

    def block(items):
        return "[\n" + ",\n".join(json.dumps(x, separators=(",", ":")) for x in items) + "\n]"

    with open(path, "w") as f:
        f.write('{"generator":"scripts/sampler-vectors.py",\n')
        f.write('"torch":%s,\n' % json.dumps(torch.__version__))
        f.write('"epochs":%s,\n' % json.dumps(EPOCHS))
        f.write('"identity":%s,\n' % block(identity))
        f.write('"shuffled":%s}\n' % block(shuffled))
    print("%s: %d identity cases, %d shuffled epochs" % (path, len(identity), len(shuffled)))


if __name__ == "__main__":
    main()
