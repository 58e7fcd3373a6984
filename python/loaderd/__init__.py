"""PyTorch client of loaderd, the data-loading daemon.

    import loaderd
    ds = loaderd.Dataset("unix:///run/loaderd.sock", "cifar10", batch_size=256, seed=1)
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for images, labels in ds:   # images: a view on the daemon's shared memory
            ...

See Dataset for the memory rules (when a batch's memory goes back to the
daemon) and resumption; python/README.md for the whole picture.
"""

from ._env import local_rank, rank_world
from ._errors import Error, ProtocolError
from ._stream import Batch, Params
from .dataset import BatchIterator, Dataset, DatasetInfo, channel, list_datasets

__all__ = ["Batch", "BatchIterator", "Dataset", "DatasetInfo", "Error", "Params", "ProtocolError",
           "channel", "list_datasets", "local_rank", "rank_world"]
__version__ = "0.1.0"
