#!/usr/bin/python3
"""DDP over loaderd: one daemon per node, one stream per rank.

    torchrun --standalone --nproc_per_node=2 --redirects 1 --tee 1 python/examples/ddp.py
    torchrun ... python/examples/ddp.py --address unix:///run/loaderd.sock --dataset cifar10

Without --address, local rank 0 of each node starts the node's daemon with
loaderd.serve() on a socket path every rank of the node can compute (from
torchrun's run id and master port), serving --spec as --dataset; the other
local ranks wait for it (connect_timeout). Ranks and world size come from
torchrun's environment (loaderd.Dataset reads them from torch.distributed).
Every rank uses the same seed and set_epoch, and gets its disjoint, equal
share of each epoch, as with DistributedSampler.

The run checks what it claims, and exits 1 otherwise: in every epoch the
ranks' dataset indices are disjoint and together cover the dataset; the
mean loss of the last epoch is below the first's; the evaluation pass
(Dataset.eval: no shuffle, no augmentation) covers the dataset once.

(--redirects 1 --tee 1: Debian's torchrun, torch 1.13 on Python 3.11, fails
with "AttributeError: 'NoneType' object has no attribute 'get'" without
them; see scripts/python-test.sh.)
"""

import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

try:
    import loaderd
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import loaderd


def node_socket():
    """A socket path that every local rank of this run computes alike."""
    run = os.environ.get("TORCHELASTIC_RUN_ID", "run")
    port = os.environ.get("MASTER_PORT", "0")
    return os.path.join(tempfile.gettempdir(), f"loaderd-ddp-{run}-{port}.sock")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--address", help="a running daemon (default: start one per node)")
    ap.add_argument("--dataset", default="train")
    ap.add_argument("--spec", default="synthetic:4096", help="what the started daemon serves as --dataset")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    dist.init_process_group("gloo")  # CPU; "nccl" with one GPU per rank
    rank, world = dist.get_rank(), dist.get_world_size()
    local = loaderd.local_rank()
    daemon = None
    address = args.address
    if address is None:
        sock = node_socket()
        if local == 0:
            daemon = loaderd.serve({args.dataset: args.spec}, socket=sock, workers=2)
        address = "unix://" + sock
    try:
        ok = train(args, address, rank, world)
    finally:
        dist.barrier()  # every rank is done streaming before the daemon stops
        if daemon is not None:
            daemon.stop()
        dist.destroy_process_group()
    if not ok:
        sys.exit(1)


def train(args, address, rank, world):
    # The waits cover a daemon that local rank 0 is still starting.
    train_ds = loaderd.Dataset(address, args.dataset, args.batch, seed=args.seed, epochs=args.epochs,
                               connect_timeout=60)
    eval_ds = loaderd.Dataset.eval(address, args.dataset, 256, connect_timeout=60)
    assert (train_ds.rank, train_ds.world_size) == (rank, world)
    n = train_ds.info().size
    torch.manual_seed(args.seed)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    ok = True
    losses = []
    for epoch in range(args.epochs):
        train_ds.set_epoch(epoch)
        seen, loss_sum = [], 0.0
        model.train()
        for b in train_ds.batches():
            loss = F.cross_entropy(model(b.images), b.labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += b.indices.tolist()
            loss_sum += loss.item() * len(b.indices)
        mean = torch.tensor([loss_sum, len(seen)], dtype=torch.float64)
        dist.all_reduce(mean)
        losses.append(mean[0].item() / mean[1].item())
        shares = [None] * world
        dist.all_gather_object(shares, seen)
        if rank == 0:
            flat = [i for s in shares for i in s]
            disjoint = len(flat) == len(set(flat))
            complete = set(flat) == set(range(n))
            print(f"epoch {epoch}: loss {losses[-1]:.4f}, ranks saw {[len(s) for s in shares]} samples, "
                  f"disjoint {disjoint}, complete {complete}", flush=True)
            ok &= disjoint and complete and all(len(s) == len(shares[0]) for s in shares)
    # Evaluation: this rank's share in dataset order, no augmentation.
    model.eval()
    correct, count, seen = 0, 0, []
    with torch.no_grad():
        for images, labels in eval_ds:
            correct += (model(images).argmax(1) == labels).sum().item()
            count += len(labels)
    tot = torch.tensor([correct, count])
    dist.all_reduce(tot)
    if rank == 0:
        falls = losses[-1] < losses[0]
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} ({'falls' if falls else 'DOES NOT FALL'}); "
              f"eval accuracy {tot[0].item() / tot[1].item():.3f} over {tot[1].item()} samples "
              f"({world} ranks, {n} in the dataset)", flush=True)
        ok &= falls and tot[1].item() == n
        print("ddp: OK" if ok else "ddp: FAILED", flush=True)
    flag = torch.tensor([int(ok)])
    dist.broadcast(flag, 0)
    train_ds.close()
    eval_ds.close()
    return bool(flag.item())


if __name__ == "__main__":
    main()
