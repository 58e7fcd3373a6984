#!/usr/bin/python3
"""Write sampler/testdata/torch-vectors.json: what torch.randperm and
torch.utils.data.DistributedSampler(shuffle=True) yield, the oracle of
sampler/torchperm_test.go (order=torch).

    /usr/bin/python3 scripts/torch-vectors.py [OUT]
    /usr/bin/python3 scripts/torch-vectors.py --cases < CASES.json

Needs Debian's python3-torch, so run it with /usr/bin/python3
(scripts/python-setup.sh installs it). The output is deterministic: rerun
it after changing the tables below and commit the file it writes.

The file holds:

  randperm     torch.randperm(n) under torch.Generator().manual_seed(seed),
               whole for small n, as a digest for large n. Seeds at and
               past 2^32 show that torch seeds its engine with the low 32
               bits.
  distributed  every rank's list of DistributedSampler(range(n), world,
               rank, shuffle=True, seed, drop_last) after set_epoch(epoch),
               whole for small n, as digests for large n; n < world and
               n = 1 included, so the padding repeats the whole order.

A digest is {"len", "head": the first 8, "tail": the last 8, "sha256":
of the list as little-endian int64}.

With --cases it reads a JSON list of {"n", "world", "seed", "epoch",
"drop_last"} from stdin and writes, for each, the list of every rank's
list: the live check of sampler/torchperm_test.go.
"""

import hashlib
import json
import os
import struct
import sys

import torch
from torch.utils.data import DistributedSampler

PERM_NS = [1, 2, 3, 4, 5, 8, 10, 16, 31, 100, 257, 1000]
PERM_SEEDS = [0, 1, 7, 42, 2**31, 2**32 - 1, 2**32, 2**32 + 7, 2**63 + 5, 2**64 - 1]
LARGE_PERM = [(1873, 3), (50000, 0), (50000, 2**32 + 7), (1000003, 11)]

# Keep the small cases cheap: each (n, world, drop_last) gets one
# (seed, epoch), taken in turn from these lists.
DIST_NS = [1, 2, 3, 5, 7, 10, 17, 64, 100, 257, 1000]
DIST_WORLDS = [1, 2, 3, 4, 7, 8, 16]
DIST_SEEDS = [0, 1, 7, 42, 2**32 + 7, 2**63 + 5, 12345]
DIST_EPOCHS = [0, 1, 2, 5, 99]
LARGE_DIST = [(50000, 8, 0, 0), (50000, 7, 42, 3), (50000, 1, 2**32 + 1, 2)]


def randperm(n, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.randperm(n, generator=g).tolist()


def ranks(n, world, seed, epoch, drop_last):
    out = []
    for rank in range(world):
        s = DistributedSampler(range(n), num_replicas=world, rank=rank,
                               shuffle=True, seed=seed, drop_last=drop_last)
        s.set_epoch(epoch)
        idx = [int(i) for i in s]
        assert len(idx) == s.num_samples
        out.append(idx)
    return out


def digest(xs):
    h = hashlib.sha256()
    h.update(struct.pack("<%dq" % len(xs), *xs))
    return {"len": len(xs), "head": xs[:8], "tail": xs[-8:], "sha256": h.hexdigest()}


def live():
    cases = json.load(sys.stdin)
    json.dump([ranks(c["n"], c["world"], c["seed"], c["epoch"], c["drop_last"]) for c in cases], sys.stdout)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "..", "sampler", "testdata", "torch-vectors.json")

    perms = []
    for n in PERM_NS:
        for seed in PERM_SEEDS:
            perms.append({"n": n, "seed": seed, "perm": randperm(n, seed)})
    for n, seed in LARGE_PERM:
        perms.append({"n": n, "seed": seed, "digest": digest(randperm(n, seed))})

    dist, k = [], 0
    for n in DIST_NS:
        for world in DIST_WORLDS:
            for drop in (False, True):
                seed, epoch = DIST_SEEDS[k % len(DIST_SEEDS)], DIST_EPOCHS[k % len(DIST_EPOCHS)]
                k += 1
                dist.append({"n": n, "world": world, "seed": seed, "epoch": epoch,
                             "drop_last": drop, "ranks": ranks(n, world, seed, epoch, drop)})
    for n, world, seed, epoch in LARGE_DIST:
        for drop in (False, True):
            dist.append({"n": n, "world": world, "seed": seed, "epoch": epoch, "drop_last": drop,
                         "digests": [digest(r) for r in ranks(n, world, seed, epoch, drop)]})

    def block(items):
        return "[\n" + ",\n".join(json.dumps(x, separators=(",", ":")) for x in items) + "\n]"

    with open(path, "w") as f:
        f.write('{"generator":"scripts/torch-vectors.py",\n')
        f.write('"torch":%s,\n' % json.dumps(torch.__version__))
        f.write('"randperm":%s,\n' % block(perms))
        f.write('"distributed":%s}\n' % block(dist))
    print("%s: %d randperm cases, %d sampler cases" % (path, len(perms), len(dist)))


if __name__ == "__main__":
    if sys.argv[1:] == ["--cases"]:
        live()
    else:
        main()
