"""loaderd.Dataset: a torch IterableDataset fed by a loaderd daemon."""

import atexit
import collections
import sys
import time
import weakref

import grpc
import torch

from ._env import rank_world
from ._errors import Error, ProtocolError, from_rpc
from ._stream import Session
from .v1 import loader_pb2 as pb
from .v1 import loader_pb2_grpc as pb_grpc

_DTYPES = {None: pb.DTYPE_UNSPECIFIED, "u8": pb.DTYPE_U8, "f32": pb.DTYPE_F32, "f16": pb.DTYPE_F16, "bf16": pb.DTYPE_BF16}
_LAYOUTS = {None: pb.LAYOUT_UNSPECIFIED, "hwc": pb.LAYOUT_HWC, "chw": pb.LAYOUT_CHW}
_TRANSPORTS = {"inline": pb.TRANSPORT_INLINE, "shm": pb.TRANSPORT_SHM}
_TORCH_DTYPES = {torch.uint8: "u8", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}

# The fields that decide which samples a position means: a state saved
# under other values would resume somewhere else.
_PLAN_FIELDS = ("dataset", "seed", "rank", "world_size", "batch_size", "shuffle", "drop_last", "drop_last_batch")

DatasetInfo = collections.namedtuple("DatasetInfo", "name format size classes shape layout default_augment")
DatasetInfo.__doc__ = "A dataset the daemon registered; shape is (height, width, channels)."


def target(address):
    """A gRPC target from "host:port", "unix:///path" or a bare socket path."""
    if address.startswith("/"):
        return "unix:" + address
    return address


def channel(address, options=()):
    """An insecure gRPC channel with the receive limit lifted: an inline
    batch of 256 f32 CIFAR images is 3 MiB, over gRPC's 4 MiB default at 512."""
    opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    return grpc.insecure_channel(target(address), options=opts + list(options))


def list_datasets(address, timeout=10.0):
    """The datasets a daemon serves, as DatasetInfo tuples sorted by name."""
    with channel(address) as ch:
        try:
            resp = pb_grpc.LoaderStub(ch).ListDatasets(pb.ListDatasetsRequest(), timeout=timeout)
        except grpc.RpcError as e:
            raise from_rpc(e, f"list datasets at {address}") from None
    return list_datasets_from(resp)


# Datasets with a channel, closed before the interpreter finalises: a gRPC
# channel closed later (from __del__) waits for threads that no longer run.
_live = weakref.WeakSet()


@atexit.register
def _close_all():
    for ds in list(_live):
        try:
            ds.close()
        except Exception:
            pass


def _ceil_div(a, b):
    return -(-a // b)


class Dataset(torch.utils.data.IterableDataset):
    """Batches of one rank's share of a dataset the daemon serves.

    ``for images, labels in ds`` yields one epoch of batches, from the
    dataset's position: ``(epoch, batch)`` starts at ``(0, 0)``, moves past
    each batch the iterator returns, and to ``(epoch + 1, 0)`` after an
    epoch's last batch, so the next ``iter()`` serves the next epoch (a
    reshuffle) even without ``set_epoch``. An iterator left early (break,
    exception, garbage collection) ends its stream; the next one resumes
    after the last batch returned. ``set_epoch(e)`` rewinds to the start of
    epoch ``e``; ``state_dict()`` / ``load_state_dict()`` save and restore
    the position for a mid-epoch resume. ``batches()`` yields ``Batch``
    objects instead, with indices, epoch, batch index and augmentation
    parameters.

    Memory: the images tensor is a view on the daemon's shared memory
    (transport "shm") or on the client's buffer ring ("inline"); no copy is
    made after it arrives. The iterator keeps the last ``hold`` batches
    valid (default 1): a batch's memory goes back to the daemon when the
    iterator is asked for the batch ``hold`` places after it, when the epoch
    ends, or when the iterator is closed, whichever comes first; or earlier
    with ``Batch.release()``. Labels, indices and params are ordinary
    tensors the caller may keep; keep images past that point with
    ``images.clone()`` (or ``.cuda()``). Writing into images in place is
    allowed while the batch is held. With ``pin=True`` and CUDA, a released
    batch is acknowledged only once the current CUDA stream has passed the
    release point, so ``images.cuda(non_blocking=True)`` is safe.

    One iterator at a time: ``iter()`` closes the dataset's previous
    iterator. Not safe for concurrent use. Use it directly or in a
    ``DataLoader(ds, batch_size=None, num_workers=0)``: the daemon does the
    loading, and in a DataLoader worker process iterating raises Error (the
    gRPC channel does not survive fork, and each worker would stream every
    batch).

    Arguments:
        address: "host:port", "unix:///path/to/sock" or a socket path.
        dataset: a name the daemon registered (see list_datasets).
        batch_size: samples per batch.
        seed: shuffle and augmentation seed; every rank must use the same.
        rank, world_size: this process's share; None takes them from an
            initialised torch.distributed, else RANK / WORLD_SIZE (torchrun),
            else LOCAL_RANK / LOCAL_WORLD_SIZE, else 0 of 1.
        epochs: total epochs of the run (epochs 0..epochs-1); None is no
            limit. An iterator at epoch >= epochs yields nothing.
        shuffle: reshuffle every epoch (False keeps dataset order).
        drop_last: DistributedSampler's drop_last: drop the tail so ranks
            get equal shares, instead of padding by wrapping around.
        drop_last_batch: DataLoader's drop_last: skip a short last batch.
        augment: augmentation spec, e.g. "crop=32:4,flip=0.5,
            normalize=cifar10,out=f32:chw"; None is the dataset's default.
        dtype: "f32", "f16", "bf16", "u8" (or the torch dtype); None takes
            the spec's out= type (f32 without one).
        layout: "chw" or "hwc"; None takes the spec's (chw without one).
        transport: "shm" (same host: tensors are views on the daemon's
            memory) or "inline" (bytes over gRPC, from any host).
        prefetch: batches the daemon may have sent ahead of the ones held.
        hold: batches the iterator keeps valid (see Memory).
        pin: page-lock the batch memory for CUDA (cudaHostRegister of the
            shared region, pinned ring for inline) so host-to-device copies
            are asynchronous DMA. Without CUDA it warns once per stream and
            does nothing else.
        include_params: fill Batch.params with each sample's crop and flip.
        name: label for the daemon's logs (default "python/rank<r>").
        reconnects: times a stream resumes after the daemon went away
            (UNAVAILABLE), each time waiting up to reconnect_wait seconds.
    """

    def __init__(self, address, dataset, batch_size, seed=0, rank=None, world_size=None, *,
                 epochs=None, shuffle=True, drop_last=False, drop_last_batch=False, augment=None,
                 dtype=None, layout=None, transport="shm", prefetch=4, hold=1, pin=False,
                 include_params=False, name=None, reconnects=5, reconnect_wait=10.0):
        super().__init__()
        if isinstance(dtype, torch.dtype):
            dtype = _TORCH_DTYPES.get(dtype, dtype)
        for what, value, allowed in (("dtype", dtype, _DTYPES), ("layout", layout, _LAYOUTS),
                                     ("transport", transport, _TRANSPORTS)):
            if value not in allowed:
                raise ValueError(f"loaderd: {what} {value!r} (want one of {sorted(k for k in allowed if k)})")
        if batch_size < 1 or prefetch < 1 or hold < 1:
            raise ValueError(f"loaderd: batch_size {batch_size}, prefetch {prefetch}, hold {hold} must be >= 1")
        if epochs is not None and epochs < 0:
            raise ValueError(f"loaderd: epochs {epochs} < 0")
        self.address = address
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.rank, self.world_size = rank_world(rank, world_size)
        self.epochs = epochs
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.drop_last_batch = bool(drop_last_batch)
        self.augment = augment or ""
        self.dtype, self.layout, self.transport = dtype, layout, transport
        self.prefetch, self.hold = int(prefetch), int(hold)
        self.pin = bool(pin)
        self.include_params = bool(include_params)
        self.name = name or f"python/rank{self.rank}"
        self.reconnects, self.reconnect_wait = int(reconnects), float(reconnect_wait)
        self._pos = (0, 0)
        self._channel = None
        self._stub = None
        self._session = None
        self._active = None
        self._info = None

    # -- position -------------------------------------------------------

    @property
    def position(self):
        """(epoch, batch): the first batch not yet returned."""
        return self._pos

    @property
    def epoch(self):
        return self._pos[0]

    def set_epoch(self, epoch):
        """Start the next iterator at the first batch of epoch."""
        self._seek((int(epoch), 0))

    def state_dict(self):
        """The position after the last batch returned, with the fields that
        give it meaning."""
        d = {f: getattr(self, f) for f in _PLAN_FIELDS}
        d["epoch"], d["batch"] = self._pos
        return d

    def load_state_dict(self, state):
        """Resume at a saved position. The plan fields (dataset, seed, rank,
        world_size, batch_size, shuffle, drop_last, drop_last_batch) must
        match: the same position means other samples under others."""
        diff = [f"{f} {state[f]!r} != {getattr(self, f)!r}" for f in _PLAN_FIELDS
                if f in state and state[f] != getattr(self, f)]
        if diff:
            raise ValueError("loaderd: state from another plan: " + ", ".join(diff))
        epoch, batch = int(state["epoch"]), int(state["batch"])
        if epoch < 0 or batch < 0:
            raise ValueError(f"loaderd: position ({epoch}, {batch})")
        self._seek((epoch, batch))

    def _seek(self, pos):
        if pos != self._pos:
            self._close_active()
            self._close_session()  # it would send the old position's batches
            self._pos = pos

    # -- sizes ----------------------------------------------------------

    def info(self):
        """DatasetInfo of the served dataset (one ListDatasets call, cached)."""
        if self._info is None:
            try:
                resp = self._get_stub().ListDatasets(pb.ListDatasetsRequest(), timeout=30)
            except grpc.RpcError as e:
                raise from_rpc(e, f"list datasets at {self.address}") from None
            for d in list_datasets_from(resp):
                if d.name == self.dataset:
                    self._info = d
                    break
            else:
                raise Error(f"loaderd: unknown dataset {self.dataset!r} at {self.address} "
                            f"(registered: {', '.join(d.name for d in resp.datasets)})", grpc.StatusCode.NOT_FOUND)
        return self._info

    def samples_per_epoch(self):
        """This rank's samples per epoch (DistributedSampler's num_samples)."""
        if self._session is not None:
            return int(self._session.header.samples_per_epoch)
        n, w = self.info().size, self.world_size
        return n // w if self.drop_last else _ceil_div(n, w)

    def __len__(self):
        """Batches per epoch for this rank."""
        if self._session is not None:
            return self._session.batches_per_epoch
        s = self.samples_per_epoch()
        return s // self.batch_size if self.drop_last_batch else _ceil_div(s, self.batch_size)

    # -- iteration ------------------------------------------------------

    def __iter__(self):
        """(images, labels) for the rest of the current epoch."""
        return BatchIterator(self, epochs=1, pairs=True)

    def batches(self, epochs=1):
        """Batch objects for epochs epochs from the position (None: until
        the run's last epoch, or endlessly)."""
        return BatchIterator(self, epochs=epochs, pairs=False)

    def close(self):
        """End the stream, if any, and close the channel. The dataset may be
        iterated again afterwards (it reconnects)."""
        self._close_active()
        self._close_session()
        if self._channel is not None:
            self._channel.close()
            self._channel = self._stub = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if sys.is_finalizing():
            return
        try:
            self.close()
        except Exception:
            pass

    def __getstate__(self):
        # A DataLoader worker (or a pickle) gets the settings, not the
        # channel or stream, which cannot cross a process boundary.
        s = self.__dict__.copy()
        s.update(_channel=None, _stub=None, _session=None, _active=None)
        return s

    def _get_stub(self):
        if self._stub is None:
            self._channel = channel(self.address)
            self._stub = pb_grpc.LoaderStub(self._channel)
            _live.add(self)
        return self._stub

    def _open_msg(self):
        epoch, batch = self._pos
        return pb.Open(
            dataset=self.dataset, rank=self.rank, world=self.world_size, batch_size=self.batch_size,
            seed=self.seed, no_shuffle=not self.shuffle, drop_last=self.drop_last,
            drop_last_batch=self.drop_last_batch, start_epoch=epoch, start_batch=batch,
            epochs=0 if self.epochs is None else self.epochs - epoch, augment=self.augment,
            dtype=_DTYPES[self.dtype], layout=_LAYOUTS[self.layout], transport=_TRANSPORTS[self.transport],
            max_in_flight=self.prefetch + self.hold, include_params=self.include_params, client_name=self.name)

    def _open(self, wait_for_ready=False):
        self._session = Session(self._get_stub(), self._open_msg(), pin=self.pin, wait_for_ready=wait_for_ready)
        h = self._session.header
        if (h.start_epoch, h.start_batch) != self._pos:
            self._close_session()
            raise ProtocolError(f"loaderd: asked to start at {self._pos}, the daemon starts at "
                                f"({h.start_epoch}, {h.start_batch})")
        return self._session

    def _receive(self):
        """The batch at the position, or None at the end of the stream."""
        s = self._session or self._open()
        for attempt in range(self.reconnects + 1):
            try:
                b = s.next()
                break
            except Error as e:
                if e.code != grpc.StatusCode.UNAVAILABLE or attempt == self.reconnects:
                    raise
                s = self._reconnect(e)
        if b is None:
            self._close_session()
            return None
        if (b.epoch, b.index) != self._pos:
            raise ProtocolError(f"loaderd: expected batch {self._pos}, got ({b.epoch}, {b.index})")
        nxt = (b.epoch, b.index + 1)
        if nxt[1] >= s.batches_per_epoch:
            nxt = (b.epoch + 1, 0)
        self._pos = nxt
        return b

    def _reconnect(self, err):
        # Batches the caller holds stay readable: their memory lives as long
        # as their views; their acks are dropped with the old stream.
        self._close_session()
        deadline = time.monotonic() + self.reconnect_wait
        while True:
            try:
                grpc.channel_ready_future(self._channel).result(timeout=max(0.0, deadline - time.monotonic()))
                return self._open(wait_for_ready=True)
            except (grpc.FutureTimeoutError, Error) as e:
                if isinstance(e, Error) and e.code != grpc.StatusCode.UNAVAILABLE:
                    raise  # back, but refusing the stream (e.g. the dataset is gone)
                if time.monotonic() >= deadline:
                    raise Error(f"loaderd: stream lost at {self._pos} and not resumed within "
                                f"{self.reconnect_wait}s: {e}", grpc.StatusCode.UNAVAILABLE) from err
                time.sleep(0.1)

    def _close_session(self):
        if self._session is not None:
            self._session.close()
            self._session = None

    def _close_active(self):
        it = self._active() if self._active is not None else None
        if it is not None:
            it.close()  # ends the stream too: it is mid-epoch
        self._active = None

    def _is_active(self, it):
        return self._active is not None and self._active() is it


def list_datasets_from(resp):
    layouts = {pb.LAYOUT_HWC: "hwc", pb.LAYOUT_CHW: "chw"}
    return [DatasetInfo(d.name, d.format, d.size, list(d.classes), (d.shape.height, d.shape.width, d.shape.channels),
                        layouts.get(d.layout), d.default_augment) for d in resp.datasets]


class BatchIterator:
    """Iterates a Dataset's batches; see Dataset for when memory is released."""

    def __init__(self, ds, epochs, pairs):
        if torch.utils.data.get_worker_info() is not None:
            # A forked worker inherits the parent's gRPC channel, which does
            # not survive fork(); and every worker would stream every batch.
            raise Error("loaderd: iterate a loaderd.Dataset in the main process: "
                        "DataLoader(ds, batch_size=None, num_workers=0), or no DataLoader at all "
                        "(the daemon does the loading)")
        ds._close_active()
        # Weak: an iterator the caller dropped must be collectable, so that
        # its __del__ ends the stream.
        ds._active = weakref.ref(self)
        self._ds = ds
        self._pairs = pairs
        self._held = collections.deque()
        self._end = None if epochs is None else ds.position[0] + epochs
        if ds.epochs is not None:
            self._end = ds.epochs if self._end is None else min(self._end, ds.epochs)
        self._done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        ds = self._ds
        try:
            while len(self._held) >= ds.hold:
                self._held.popleft().release()
            b = None
            if self._end is None or ds.position[0] < self._end:
                b = ds._receive()
        except BaseException:
            self.close()
            raise
        if b is None:
            self._finish()
            raise StopIteration
        self._held.append(b)
        return (b.images, b.labels) if self._pairs else b

    def _finish(self):
        # A finished epoch keeps the stream: its next batches are already
        # in flight. The run's last epoch ends it.
        self._release_held()
        self._done = True
        ds = self._ds
        if ds._is_active(self):
            ds._active = None
        if ds.epochs is not None and ds.position[0] >= ds.epochs:
            ds._close_session()

    def _release_held(self):
        while self._held:
            self._held.popleft().release()

    def close(self):
        """Stop early: release held batches and end the stream (the position
        stays after the last batch returned)."""
        if self._done:
            return
        self._done = True
        self._release_held()
        ds = self._ds
        if ds._is_active(self):
            ds._active = None
            ds._close_session()

    def __del__(self):
        if sys.is_finalizing():
            return
        try:
            self.close()
        except Exception:
            pass
