"""Rank and world size as torchrun sets them."""

import os


def _env_int(*names):
    for n in names:
        v = os.environ.get(n)
        if v:
            try:
                return int(v)
            except ValueError:
                raise ValueError(f"loaderd: environment variable {n}={v!r} is not an integer") from None
    return None


def rank_world(rank=None, world_size=None):
    """Resolve (rank, world_size): explicit arguments first, then an
    initialised torch.distributed, then torchrun's RANK / WORLD_SIZE, then
    LOCAL_RANK / LOCAL_WORLD_SIZE (one node), then (0, 1)."""
    if rank is None or world_size is None:
        try:
            import torch.distributed as dist
            if dist.is_available() and dist.is_initialized():
                rank = dist.get_rank() if rank is None else rank
                world_size = dist.get_world_size() if world_size is None else world_size
        except ImportError:
            pass
    if rank is None:
        rank = _env_int("RANK", "LOCAL_RANK")
    if world_size is None:
        world_size = _env_int("WORLD_SIZE", "LOCAL_WORLD_SIZE")
    rank = 0 if rank is None else rank
    world_size = 1 if world_size is None else world_size
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"loaderd: rank {rank} of world size {world_size}")
    return rank, world_size


def local_rank():
    """LOCAL_RANK (the process's device index under torchrun), or 0."""
    v = _env_int("LOCAL_RANK")
    return 0 if v is None else v
