"""PyTorch client of loaderd, the data-loading daemon.

    import loaderd
    ds = loaderd.Dataset("unix:///run/loaderd.sock", "cifar10", batch_size=256, seed=1)
    test = loaderd.Dataset.eval("unix:///run/loaderd.sock", "cifar10-test", batch_size=500)
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for images, labels in ds:   # images: a view on the daemon's shared memory
            ...

    with loaderd.serve({"cifar10": "cifar:/data/cifar-10-batches-bin"}) as daemon:
        ds = loaderd.Dataset(daemon.address, "cifar10", 256)

See Dataset for the memory rules and resumption; python/README.md and
docs/PYTORCH.md for the whole picture.
"""

from ._env import local_rank, rank_world
from ._errors import Error, ProtocolError, UnreachableError
from ._rpc import DatasetInfo, channel, list_datasets, sample_names
from ._batch import Batch, Mix, Params
from .dataset import BatchIterator, Dataset, eval_augment
from .serve import Daemon, find_binary, serve

__all__ = ["Batch", "BatchIterator", "Daemon", "Dataset", "DatasetInfo", "Error", "Mix", "Params", "ProtocolError",
           "UnreachableError", "channel", "eval_augment", "find_binary", "list_datasets", "local_rank",
           "rank_world", "sample_names", "serve"]
__version__ = "0.2.0"
