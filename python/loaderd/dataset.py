"""loaderd.Dataset: a torch IterableDataset fed by a loaderd daemon."""

from __future__ import annotations

import atexit
import collections
import ctypes
import os
import sys
import time
import types
import weakref
from typing import Any, Deque, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, Union

import grpc
import torch

from . import _address, _creds, _fork, _get, _pool, _rpc, _shm, _stream, _values
from .serve import after_fork as _serve_after_fork, stop_all as _serve_stop_all  # loaderd.serve is also a function
from ._batch import Batch
from ._env import rank_world
from ._errors import Error, ProtocolError
from ._stream import Session, close_all
from .v1 import loader_pb2 as pb
from .v1 import loader_pb2_grpc as pb_grpc

# DataLoader's fetcher, to tell DataLoader(ds) from DataLoader(ds, batch_size=None)
_FETCHER: Optional[Type[Any]] = None
_FETCHER_INIT: Optional[types.CodeType] = None
try:
    from torch.utils.data._utils import fetch as _fetch
    _FETCHER = _fetch._IterableDatasetFetcher
    _FETCHER_INIT = _fetch._IterableDatasetFetcher.__init__.__code__
except (ImportError, AttributeError):  # pragma: no cover - a torch that moved it
    _FETCHER = _FETCHER_INIT = None

_DTYPES = {None: pb.DTYPE_UNSPECIFIED, "u8": pb.DTYPE_U8, "f32": pb.DTYPE_F32, "f16": pb.DTYPE_F16, "bf16": pb.DTYPE_BF16}
_LAYOUTS = {None: pb.LAYOUT_UNSPECIFIED, "hwc": pb.LAYOUT_HWC, "chw": pb.LAYOUT_CHW}
_TRANSPORTS = {"inline": pb.TRANSPORT_INLINE, "shm": pb.TRANSPORT_SHM}
_TORCH_DTYPES = {torch.uint8: "u8", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
MAX_BATCH = 16384  # the daemon's limit (Open.batch_size)
MAX_WINDOW = 32    # the daemon's limit (Open.max_in_flight)

# The fields that decide which samples a position means: a state saved
# under other values of _ORDER_FIELDS would resume somewhere else. A state
# saved under other _SPLIT_FIELDS (another world, batch size, rank) resumes
# elastically through its global position (docs/RESUME.md).
_ORDER_FIELDS = ("dataset", "seed", "shuffle", "sampler_drop_last")
_SPLIT_FIELDS = ("rank", "world_size", "batch_size", "drop_last")
_PLAN_FIELDS = _ORDER_FIELDS + _SPLIT_FIELDS

DatasetInfo = _rpc.DatasetInfo
_PathLike = Union[str, "os.PathLike[str]"]
channel = _rpc.channel
list_datasets = _rpc.list_datasets

# Datasets with a channel, closed before the interpreter finalises: a gRPC
# channel or stream closed later (from __del__, during finalisation) leaves
# gRPC's threads running into the shutdown, which aborts the process.
_live: weakref.WeakSet[Dataset] = weakref.WeakSet()


@atexit.register
def _close_all():
    for ds in list(_live):
        try:
            ds.close()
        except Exception:
            pass
    close_all()
    _serve_stop_all()  # after the streams: a daemon stopped first would end them with UNAVAILABLE


def _daemon_stopping(unix_path, why):
    """Daemon.stop() of the daemon on unix_path, in this process: end this
    process's streams to it and close the Datasets' channels to it first.
    gRPC's graceful stop waits for every client connection to close, and
    an idle channel (a Dataset whose iterator from next(iter(ds)) was
    dropped) or an open call stays connected until the daemon gives up on
    it, five seconds later. A stream used afterwards raises why; a Dataset
    dials again on its next call."""
    _stream.abandon(unix_path, why)
    for ds in list(_live):
        if ds._pool is None and ds._channel is not None and getattr(ds._addr, "unix_path", None) == unix_path:
            ds._channel.close()
            ds._channel = ds._stub = None


def _after_fork_in_child():
    """A forked child starts afresh: the parent's streams, channels and
    daemons stay the parent's. Its Datasets keep their settings and
    position and dial again on their next call (with gRPC's fork support,
    see _fork; without it, that call raises an Error at once); its
    iterators' streams raise an Error that says to start a new iterator.
    The parent's gRPC objects are kept alive for good: freeing them here,
    even at exit, may block on state that only the parent's threads would
    release."""
    parent = _fork._pid
    datasets = list(_live)
    orphans = _stream.after_fork(parent)
    _fork.forked(bool(orphans) or any(ds._channel is not None for ds in datasets))
    for ds in datasets:
        orphans += ds._forked()
    _live.clear()
    _shm.after_fork()
    _serve_after_fork()
    if orphans:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(orphans))  # never freed


os.register_at_fork(before=_stream.before_fork, after_in_child=_after_fork_in_child)


def _ceil_div(a, b):
    return -(-a // b)


def _batches_from(n, world, batch_size, sampler_drop_last, drop_last, offset):
    """Batches each rank gets in the rest of an epoch of n after global
    offset (sampler.Distributed.BatchesFrom)."""
    rest = n - offset
    per = rest // world if sampler_drop_last else _ceil_div(rest, world)
    return per // batch_size if drop_last else _ceil_div(per, batch_size)


def _global(state):
    """A state's position as (epoch, entries of the epoch's order consumed):
    every rank of its world took batch * batch_size samples after the
    offset, rank r the list positions r, r + world, ... (docs/RESUME.md)."""
    epoch, batch, offset = int(state["epoch"]), int(state["batch"]), int(state.get("offset", 0))
    if epoch < 0 or batch < 0 or offset < 0:
        raise ValueError(f"loaderd: position ({epoch}, {batch}, offset {offset})")
    return epoch, offset + batch * int(state["batch_size"]) * int(state["world_size"])


def _state_int(state, field, default=None):
    v = state.get(field, default)
    try:
        i = int(v)
    except (TypeError, ValueError):
        i = None
    if isinstance(v, bool) or i is None or i != v:
        raise ValueError(f"loaderd: state field {field} is {v!r}: want an integer")
    return i


def _check_split(state):
    """Refuse a state whose world, rank or batch size cannot have been
    saved by a Dataset: its position would mean nothing (a world of 0
    would resume at the epoch's start, silently)."""
    world = _state_int(state, "world_size")
    rank = _state_int(state, "rank", 0)
    bs = _state_int(state, "batch_size")
    if world < 1:
        raise ValueError(f"loaderd: state with world_size {world}: want >= 1")
    if not 0 <= rank < world:
        raise ValueError(f"loaderd: state with rank {rank} outside its world_size {world} (want 0 <= rank < world_size)")
    if not 1 <= bs <= MAX_BATCH:
        raise ValueError(f"loaderd: state with batch_size {bs}: want 1..{MAX_BATCH}")


# The random ops eval_augment drops (besides the crops it rewrites).
_RANDOM_OPS = frozenset(("flip", "color_jitter", "random_grayscale", "gaussian_blur", "auto_augment", "rand_augment",
                         "trivial_augment_wide", "random_erasing", "mixup", "cutmix"))


def eval_augment(default_augment: str, shape: Optional[Sequence[int]] = None) -> str:
    """The evaluation form of a training spec, as torchvision recipes write
    their test transforms: the same normalisation and output, with every
    random op made deterministic. flip goes; crop=S (RandomCrop) goes when S
    is the image's size (shape: the stored (height, width, channels)) and
    becomes center_crop=S otherwise; random_resized_crop=S becomes
    resize=S/0.875,center_crop=S (Resize(256) + CenterCrop(224)). The random
    photometric ops (color_jitter, random_grayscale, gaussian_blur,
    auto_augment, rand_augment, trivial_augment_wide), random_erasing and
    the batch ops (mixup, cutmix) go. resize, center_crop, grayscale,
    totensor, normalize and out stay."""
    keep = []
    for item in default_augment.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, arg = item.partition("=")
        name = name.strip().lower()
        size = arg.split(":")[0].strip()
        if name in _RANDOM_OPS:
            continue
        if name == "crop":
            if not size.isdigit():
                raise Error(f"loaderd: cannot read the crop size of {item!r} in {default_augment!r}")
            if shape is None or not int(size) == shape[0] == shape[1]:
                keep.append(f"center_crop={int(size)}")
            continue
        if name == "random_resized_crop":
            if not size.isdigit():
                raise Error(f"loaderd: cannot read the size of {item!r} in {default_augment!r}")
            keep += [f"resize={round(int(size) / 0.875)}", f"center_crop={int(size)}"]
            continue
        keep.append(item)
    return ",".join(keep)


class Dataset(torch.utils.data.IterableDataset):
    """Batches of one rank's share of a dataset the daemon serves.

    ``for images, labels in ds`` is one epoch, as with a DataLoader: each
    ``iter(ds)`` is an independent pass over the current epoch, from its
    first batch. Finishing an epoch moves the dataset to the next one
    (reshuffled), so the next loop serves epoch + 1 even without
    ``set_epoch``; leaving a loop early (``break``, an exception) does not,
    and the next loop serves the same epoch again from its start.
    ``state_dict()`` is the position after the last batch returned, and a
    dataset given it with ``load_state_dict()`` starts its next iterator
    there: the mid-epoch resume. ``batches()`` yields ``Batch`` objects
    (indices, epoch, batch index, augmentation parameters) instead of
    pairs.

    Memory: the images tensor is a view on the daemon's shared memory
    (transport "shm") or on a buffer of the client ("inline"), with no copy
    after it arrives. Its data never changes while any tensor viewing it is
    alive, and writing into it never reaches another batch: a batch's memory
    goes back to the daemon once the iterator has released it (when the
    batch ``hold`` places later is requested, at the end of the epoch, or
    by ``Batch.release()``) AND no view of it is left; a view kept longer is
    copied out of the daemon's way when its memory is needed. Keeping
    batches is therefore safe, but each one kept past the next is a copy:
    ``images.clone()`` says so explicitly. With ``pin=True`` and CUDA,
    batches land in page-locked buffers of the client's own and a buffer is
    reused only once the CUDA stream has passed its release, so
    ``images.cuda(non_blocking=True)`` is safe.

    Evaluation: ``Dataset(..., train=False)`` or ``Dataset.eval(...)``: no
    shuffle, no random crop or flip, the dataset's own normalisation and
    output (its default spec without crop and flip).

    DataLoader: the daemon does the loading, batching and augmentation, so
    none is needed; a library that insists gets ``DataLoader(ds,
    batch_size=None)``. ``DataLoader(ds)`` (batch_size=1) and worker
    processes raise an Error that says so.

    Arguments:
        address: "host:port", "unix:///path/to/sock" or a socket path; or a
            pool of daemons serving the same datasets, "host1:port,host2:port"
            or "dns:///name:port" (every address the name resolves to,
            looked up again every 30 s): the stream is spread over them and
            survives losing any (see python/README.md, "A pool of daemons").
        dataset: a name the daemon registered (see list_datasets).
        batch_size: samples per batch, 1..16384.
        seed: shuffle and augmentation seed; every rank must use the same.
        rank, world_size: this process's share; None takes them from an
            initialised torch.distributed, else RANK / WORLD_SIZE (torchrun),
            else LOCAL_RANK / LOCAL_WORLD_SIZE, else 0 of 1.
        train: False for evaluation: shuffle off, and (without augment=)
            the dataset's default spec with its random ops made
            deterministic (see eval_augment: no flip, no random crop).
        epochs: total epochs of the run (epochs 0..epochs-1); None is no
            limit. An iterator at epoch >= epochs yields nothing.
        shuffle: reshuffle every epoch; None: True for training, False for
            evaluation.
        drop_last: DataLoader's drop_last: skip each epoch's short last
            batch.
        sampler_drop_last: DistributedSampler's drop_last: drop the tail of
            the dataset so every rank gets an equal share, instead of
            padding the ranks' shares by wrapping around (the default).
        augment: augmentation spec, e.g. "crop=32:4,flip=0.5,
            normalize=cifar10,out=f32:chw"; None is the dataset's default
            (its evaluation form with train=False).
        dtype: "f32", "f16", "bf16", "u8" (or the torch dtype); None takes
            the spec's out= type (f32 without one).
        layout: "chw" or "hwc"; None takes the spec's (chw without one).
        transport: "shm" (same host: tensors are views on the daemon's
            memory) or "inline" (bytes over gRPC, from any host); None is
            "shm" for one daemon and "inline" for a pool (which has no
            shared memory).
        prefetch: batches the daemon may send ahead of the ones held.
        hold: batches the iterator keeps unreleased (see Memory).
        pin: page-locked batches for CUDA, so host-to-device copies are
            asynchronous DMA; without CUDA it warns and does nothing else.
        include_params: fill Batch.params with each sample's crop and flip.
        normalize_on: None, or the device ("cuda", "cpu", a torch.device)
            where the spec's value ops (totensor, normalize, a float out=)
            run on receipt: the daemon sends uint8 pixels, a quarter of
            f32's bytes, and a table of what each byte becomes, and images
            arrive on that device with exactly the daemon's values.
        name: label for the daemon's logs (default "python/rank<r>").
        connect_timeout: seconds to wait for a daemon that is not up yet
            (a trainer started before it); 0 fails at once.
        reconnects, reconnect_wait: times a stream resumes after the daemon
            went away (UNAVAILABLE), each time waiting up to reconnect_wait
            seconds for it to come back. A pool redials its daemons itself,
            and fails only when every one has been down for reconnect_wait
            while the iterator waited.
        failover_after: a pool's daemon that owes batches and sends nothing
            for this many seconds (and eight of its batch times) is dropped,
            and what it owed asked of the others.
        tls, tls_ca, tls_cert, tls_key, tls_server_name, token, token_file:
            for a daemon whose TCP listener serves TLS (--tls-cert), wants
            client certificates (--tls-client-ca) or tokens (--auth-tokens);
            each None is read from LOADERD_TLS, LOADERD_TLS_CA, ...,
            LOADERD_TOKEN, LOADERD_TOKEN_FILE. A Unix socket uses none.
            See docs/DEPLOY.md ("Security on TCP").
    """

    def __init__(self, address: str, dataset: str, batch_size: int, seed: int = 0, rank: Optional[int] = None,
                 world_size: Optional[int] = None, *, train: bool = True, epochs: Optional[int] = None,
                 shuffle: Optional[bool] = None, drop_last: bool = False, sampler_drop_last: bool = False,
                 augment: Optional[str] = None, dtype: Union[str, torch.dtype, None] = None,
                 layout: Optional[str] = None, transport: Optional[str] = None, prefetch: int = 4, hold: int = 1,
                 pin: bool = False, include_params: bool = False, name: Optional[str] = None,
                 connect_timeout: float = 10.0, reconnects: int = 5, reconnect_wait: float = 10.0,
                 drop_last_batch: None = None, tls: Optional[bool] = None, tls_ca: Optional[_PathLike] = None,
                 tls_cert: Optional[_PathLike] = None, tls_key: Optional[_PathLike] = None,
                 tls_server_name: Optional[str] = None, token: Optional[str] = None,
                 token_file: Optional[_PathLike] = None, normalize_on: Union[str, torch.device, None] = None,
                 failover_after: float = 3.0) -> None:
        super().__init__()
        if drop_last_batch is not None:
            raise TypeError("loaderd: drop_last_batch is gone: drop_last now means what it means for DataLoader "
                            "(skip the short last batch); DistributedSampler's drop_last is sampler_drop_last")
        if isinstance(dtype, torch.dtype):
            dtype = _TORCH_DTYPES.get(dtype, str(dtype))  # an unsupported one is refused below
        self._addr = _address.parse_target(address)
        self._pool = self._addr if isinstance(self._addr, _address.Pool) else None
        if self._pool is not None and transport == "shm":
            raise ValueError(f"loaderd: transport 'shm' with pool {self._pool.text}: shared memory needs one daemon "
                             "on this host; a pool streams inline (transport=None or 'inline'), and "
                             "normalize_on='cuda' (or 'cpu') sends uint8, a quarter of f32's bytes")
        if transport is None:
            transport = "inline" if self._pool is not None else "shm"
        choices: Tuple[Tuple[str, Any, Mapping[Any, Any]], ...] = (
            ("dtype", dtype, _DTYPES), ("layout", layout, _LAYOUTS), ("transport", transport, _TRANSPORTS))
        for what, value, allowed in choices:
            if value not in allowed:
                raise ValueError(f"loaderd: {what} {value!r} (want one of {sorted(k for k in allowed if k)})")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH:
            raise ValueError(f"loaderd: batch_size {batch_size!r}: want an int in 1..{MAX_BATCH} "
                             "(the daemon batches; batch_size=None belongs to a DataLoader around the dataset)")
        if prefetch < 1 or hold < 1 or prefetch + hold + 1 > MAX_WINDOW:
            raise ValueError(f"loaderd: prefetch {prefetch}, hold {hold}: each >= 1, prefetch + hold <= {MAX_WINDOW - 1}")
        if epochs is not None and epochs < 0:
            raise ValueError(f"loaderd: epochs {epochs} < 0")
        if not failover_after > 0:
            raise ValueError(f"loaderd: failover_after {failover_after!r}: want seconds > 0")
        self.failover_after = float(failover_after)
        self.address = self._addr.text
        # Resolved now: a bad LOADERD_* variable fails here, not at the first batch.
        self._creds = _creds.resolve(tls=tls, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
                                     tls_server_name=tls_server_name, token=token, token_file=token_file)
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.rank, self.world_size = rank_world(rank, world_size)
        self.train = bool(train)
        self.epochs = epochs
        self.shuffle = self.train if shuffle is None else bool(shuffle)
        self.drop_last = bool(drop_last)
        self.sampler_drop_last = bool(sampler_drop_last)
        self.augment = augment
        self.dtype, self.layout, self.transport = dtype, layout, transport
        self.prefetch, self.hold = int(prefetch), int(hold)
        self.pin = bool(pin)
        self.include_params = bool(include_params)
        self.normalize_on = _values.device(normalize_on)
        self.name = name or f"python/rank{self.rank}"
        self.connect_timeout = float(connect_timeout or 0)
        self.reconnects, self.reconnect_wait = int(reconnects), float(reconnect_wait)
        self._pos = (0, 0, 0)    # (epoch, batch, offset): batch counts from the epoch's offset
        self._resume = False     # the next iterator starts at _pos even mid-epoch
        self._channel: Optional[grpc.Channel] = None
        self._stub: Optional[pb_grpc.LoaderStub] = None
        # a session whose next batch is _warm_pos (a finished epoch's)
        self._warm: Union[Session, _pool.PoolSession, None] = None
        self._warm_pos = None
        self._iters: weakref.WeakSet[BatchIterator] = weakref.WeakSet()
        self._info: Optional[DatasetInfo] = None
        self._names: Dict[int, List[str]] = {}  # page -> names (SampleNames)
        self._spec: Optional[str] = None

    @classmethod
    def eval(cls, address: str, dataset: str, batch_size: int, **kw: Any) -> Dataset:
        """An evaluation dataset: Dataset(..., train=False, **kw)."""
        kw.setdefault("train", False)
        return cls(address, dataset, batch_size, **kw)

    # -- position -------------------------------------------------------

    @property
    def position(self) -> Tuple[int, int]:
        """(epoch, batch): after the last batch returned (what state_dict
        saves). After an elastic resume, batch counts the batches of the
        epoch's rest after offset."""
        return self._pos[:2]

    @property
    def offset(self) -> int:
        """The elastic-resume offset of position's epoch: how many entries of
        its order another world consumed before this one took over; 0 but in
        an epoch resumed under another world size or batch size."""
        return self._pos[2]

    @property
    def global_position(self) -> Tuple[int, int]:
        """(epoch, consumed): how many entries of the epoch's order (shared
        by all ranks) the whole world has consumed; any world size resumes
        from it."""
        return _global(self.state_dict())

    @property
    def epoch(self) -> int:
        """The epoch the next iterator serves."""
        return self._start()[0]

    def set_epoch(self, epoch: int) -> None:
        """Serve epoch from its first batch next (DistributedSampler's
        set_epoch). A resume point loaded for that same epoch is kept."""
        epoch = int(epoch)
        if epoch < 0:
            raise ValueError(f"loaderd: epoch {epoch} < 0")
        if not (self._resume and self._pos[0] == epoch):
            self._seek((epoch, 0, 0), False)

    def state_dict(self) -> Dict[str, Any]:
        """The position after the last batch returned, with the fields that
        give it meaning: "epoch", "batch", and "offset" (0 but in an epoch
        resumed under another world; see load_state_dict)."""
        d = {f: getattr(self, f) for f in _PLAN_FIELDS}
        d["epoch"], d["batch"], d["offset"] = self._pos
        return d

    def load_state_dict(self, state: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]) -> None:
        """Resume at a saved position: the next iterator starts there.

        state is one rank's state_dict, or a list of every rank's. dataset,
        seed, shuffle and sampler_drop_last must match: they decide the
        epoch's order. world_size, batch_size, drop_last and rank may
        differ: the state's global position (the epoch and how many entries
        of its order the old world consumed) is then split afresh over
        this world, so no sample is lost and each keeps its augmentation
        (the elastic resume of docs/RESUME.md); without sampler_drop_last
        the rest is padded as DistributedSampler pads, by wrapping to the
        start of the epoch's order: fewer than world_size samples are
        delivered a second time. Any rank's
        state will do, as data-parallel ranks save after the same step;
        given every rank's, they must agree, or ValueError names them."""
        many = not isinstance(state, Mapping)
        states = [self._upgrade(s) for s in (list(state) if not isinstance(state, Mapping) else [state])]
        if not states:
            raise ValueError("loaderd: no state to load")
        for st in states:
            diff = [f"{f} {st[f]!r} != {getattr(self, f)!r}" for f in _ORDER_FIELDS
                    if f in st and st[f] != getattr(self, f)]
            if diff:
                raise ValueError("loaderd: state from another plan: " + ", ".join(diff))
        st = states[0]
        g = _global(st)
        if many:
            w = int(st.get("world_size", 1))
            ranks = sorted(int(x.get("rank", 0)) for x in states)
            globals_ = [_global(x) for x in states]
            if ranks != list(range(w)) or any(x.get("world_size", 1) != w for x in states) or len(set(globals_)) > 1:
                desc = ", ".join(f"rank {x.get('rank')} of {x.get('world_size')} at ({x['epoch']}, {x['batch']}"
                                 f", offset {x.get('offset', 0)})" for x in states)
                raise ValueError("loaderd: the ranks' states disagree (each rank must save after the same "
                                 f"step, and every rank's state be given): {desc}")
        if all(st.get(f, getattr(self, f)) == getattr(self, f) for f in ("world_size", "batch_size", "drop_last")):
            self._seek((int(st["epoch"]), int(st["batch"]), int(st.get("offset", 0))), True)
        else:
            self._seek((g[0], 0, g[1]), True)

    @staticmethod
    def _upgrade(state):
        state = dict(state)
        if "drop_last_batch" in state and "sampler_drop_last" not in state:
            # Saved by loaderd 0.1, whose drop_last was the sampler's.
            state["sampler_drop_last"] = state.pop("drop_last")
            state["drop_last"] = state.pop("drop_last_batch")
        state.setdefault("batch_size", 1)
        state.setdefault("world_size", 1)
        _check_split(state)
        return state

    def _seek(self, pos, resume):
        self._pos, self._resume = pos, resume
        if self._warm is not None and self._warm_pos != self._start():
            self._close_warm()  # it would send the old position's batches

    def _start(self):
        """Where the next iterator starts."""
        e, b, o = self._pos
        return (e, b, o) if self._resume or (b, o) == (0, 0) else (e, 0, 0)

    # -- sizes and names --------------------------------------------------

    def info(self) -> DatasetInfo:
        """DatasetInfo of the served dataset (one ListDatasets call, cached;
        waits up to connect_timeout for the daemon)."""
        info = self._info
        if info is None:
            what = f"list datasets at {self.address}"
            if self._pool is not None:
                resp = _rpc.call_pool(self._pool, self._creds, "ListDatasets", pb.ListDatasetsRequest(), what,
                                      self.connect_timeout)
            else:
                resp = _rpc.call_ready(self._get_stub().ListDatasets, pb.ListDatasetsRequest(), self._addr, what,
                                       self.connect_timeout)
            for d in _rpc.infos(resp):
                if d.name == self.dataset:
                    info = self._info = d
                    break
            else:
                # A daemon with --auth-tokens lists only the token's datasets.
                mine = " this token may open" if self._creds.token or self._creds.token_file else ""
                raise Error(f"loaderd: unknown dataset {self.dataset!r} at {self.address} "
                            f"(registered{mine}: {', '.join(d.name for d in resp.datasets) or 'none'})",
                            grpc.StatusCode.NOT_FOUND)
        return info

    def _epoch_len(self) -> int:
        """Entries of an epoch's list: the dataset's size, or for a shuffled
        loop over a weighted sampler its samples=K draws."""
        info = self.info()
        return info.epoch_samples if self.shuffle and info.epoch_samples else info.size

    def _at_epoch_end(self, pos: Tuple[int, int, int]) -> bool:
        """Whether resume point pos is after its epoch's last batch (a
        DataLoader stopped at the end of an epoch, saved by hand)."""
        _, b, o = pos
        return b > 0 and b >= _batches_from(self._epoch_len(), self.world_size, self.batch_size,
                                            self.sampler_drop_last, self.drop_last, o)

    def samples_per_epoch(self) -> int:
        """This rank's samples per epoch (DistributedSampler's num_samples)."""
        n, w = self._epoch_len(), self.world_size
        return n // w if self.sampler_drop_last else _ceil_div(n, w)

    def batches_per_epoch(self) -> int:
        """This rank's batches in a whole epoch (what a schedule of steps
        per epoch wants; len(ds) is the next loop's)."""
        s = self.samples_per_epoch()
        return s // self.batch_size if self.drop_last else _ceil_div(s, self.batch_size)

    def __len__(self) -> int:
        """Batches the next loop over the dataset yields: this rank's
        batches per epoch, or after load_state_dict the rest of the resumed
        epoch (from its batch, and under another world from its offset)."""
        _, b, o = self._start()
        if (b, o) == (0, 0):
            return self.batches_per_epoch()
        left = _batches_from(self._epoch_len(), self.world_size, self.batch_size, self.sampler_drop_last,
                             self.drop_last, o) - b
        return max(0, left)

    @property
    def dataset_size(self) -> int:
        """Samples in the served dataset, all ranks' (StreamHeader's
        dataset_size): what ds[i] indexes, 0 <= i < dataset_size. Not
        len(ds), which counts the batches a loop yields, nor
        samples_per_epoch(), this rank's share (DistributedSampler's
        num_samples)."""
        return self.info().size

    def __getitem__(self, index: Any) -> Any:
        """(image, label) of dataset index i, 0 <= i < dataset_size,
        negative counted from the end; a slice gives a list. Without
        augment= the image is the dataset's own decode as a uint8 CHW
        tensor at the image's own size (torchvision's pil_to_tensor);
        with augment= it is that pipeline's output, in the dataset's dtype
        and layout, exactly as a stream with this seed delivers the index
        in ds.epoch. One GetSamples call: for inspection and evaluation by
        index, not a training loop (iterate for that)."""
        if isinstance(index, slice):
            return self.get(range(*index.indices(self.dataset_size)))
        return self.get([index])[0]

    def get(self, indices: Union[torch.Tensor, Iterable[int]]) -> List[Tuple[torch.Tensor, int]]:
        """[(image, label)] of each dataset index, as ds[i] gives them,
        fetched in few GetSamples calls (each at most 1024 samples and
        256 MiB)."""
        ids = _get.indices(indices, self.dataset_size)
        req = pb.GetSamplesRequest(dataset=self.dataset, seed=self.seed)
        if self.augment:
            req.augment, req.epoch = self.augment, self.epoch
            req.dtype, req.layout = _DTYPES[self.dtype], _LAYOUTS[self.layout]
        what = f"samples of {self.dataset!r}"
        if self._pool is not None:
            def call(r):
                return _rpc.call_pool(self._pool, self._creds, "GetSamples", r, what, self.connect_timeout)
        else:
            def call(r):
                return _rpc.call_ready(self._get_stub().GetSamples, r, self._addr, what, self.connect_timeout)
        return _get.get(call, req, ids)

    def spec(self) -> str:
        """The augmentation spec the streams ask for ("" is the daemon's
        default for the dataset)."""
        if self._spec is None:
            if self.augment is not None:
                self._spec = self.augment
            elif self.train:
                self._spec = ""
            else:
                info = self.info()
                self._spec = eval_augment(info.default_augment, info.shape)
        return self._spec

    def sample_names(self, indices: Union[torch.Tensor, Iterable[int]]) -> List[str]:
        """The file or archive member name of each dataset index (e.g.
        Batch.indices): the source's own names, or the decimal index for a
        source without any. Fetched from the daemon in pages of 10,000 and
        cached."""
        if isinstance(indices, torch.Tensor):
            indices = indices.tolist()
        elif hasattr(indices, "tolist"):
            indices = indices.tolist()
        size = self.info().size
        out = []
        for i in indices:
            i = int(i)
            if not 0 <= i < size:
                raise IndexError(f"loaderd: index {i} outside dataset {self.dataset!r} of {size}")
            page = self._names.get(i // _rpc.MAX_NAMES)
            if page is None:
                start = i - i % _rpc.MAX_NAMES
                if self._pool is not None:
                    req = pb.SampleNamesRequest(dataset=self.dataset, start=start, count=_rpc.MAX_NAMES)
                    r = _rpc.call_pool(self._pool, self._creds, "SampleNames", req,
                                       f"sample names of {self.dataset!r}", self.connect_timeout)
                else:
                    r = _rpc.names_page(self._get_stub(), self._addr, self.dataset, start, _rpc.MAX_NAMES,
                                        self.connect_timeout)
                page = self._names[i // _rpc.MAX_NAMES] = list(r.names)
            out.append(page[i % _rpc.MAX_NAMES])
        return out

    def sample_name(self, index: int) -> str:
        """The file or archive member name of one dataset index."""
        return self.sample_names([index])[0]

    # -- iteration ------------------------------------------------------

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        """(images, labels) for one epoch: the current one, from its start
        (or from a loaded resume point)."""
        _refuse_collating_dataloader()
        return BatchIterator(self, epochs=1, pairs=True)

    def batches(self, epochs: Optional[int] = 1) -> Iterator[Batch]:
        """Batch objects for epochs epochs from the current one (None: until
        the run's last epoch, or endlessly)."""
        return BatchIterator(self, epochs=epochs, pairs=False)

    def close(self) -> None:
        """End every stream of the dataset and close its channel. The
        dataset may be iterated again afterwards (it reconnects)."""
        try:
            for it in list(self._iters):
                it.close()
            self._close_warm()
        finally:
            # After the streams' cancels: closing the channel under a call
            # still open is what gRPC handles worst.
            ch, self._channel, self._stub = self._channel, None, None
            _live.discard(self)
            if ch is not None:
                ch.close()

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self):
        if sys.is_finalizing():
            return
        try:
            self.close()
        except Exception:
            pass

    def _forked(self):
        """In a forked child (see _after_fork_in_child): drop the parent's
        channel and parked stream; the next call dials afresh. Returns what
        was dropped."""
        dropped = [x for x in (self._channel, self._stub, self._warm) if x is not None]
        self._channel = self._stub = self._warm = self._warm_pos = None
        return dropped

    def __getstate__(self):
        # A DataLoader worker (or a pickle) gets the settings, not the
        # channel or streams, which cannot cross a process boundary.
        s = self.__dict__.copy()
        s.update(_channel=None, _stub=None, _warm=None, _warm_pos=None, _iters=None)
        return s

    def __setstate__(self, s):
        self.__dict__.update(s)
        self._iters = weakref.WeakSet()

    def _get_stub(self):
        if self._stub is None:
            self._channel = _rpc.channel(self._addr, creds=self._creds)
            self._stub = pb_grpc.LoaderStub(self._channel)
            _live.add(self)
        return self._stub

    def _open_msg(self, pos):
        epoch, batch, offset = pos
        return pb.Open(
            dataset=self.dataset, rank=self.rank, world=self.world_size, batch_size=self.batch_size,
            seed=self.seed, no_shuffle=not self.shuffle, drop_last=self.sampler_drop_last,
            drop_last_batch=self.drop_last, start_epoch=epoch, start_batch=batch, start_offset=offset,
            epochs=0 if self.epochs is None else self.epochs - epoch, augment=self.spec(),
            dtype=_DTYPES[self.dtype], layout=_LAYOUTS[self.layout], transport=_TRANSPORTS[self.transport],
            # One more than prefetch + hold: the batch a loop variable still
            # holds while the next is requested.
            max_in_flight=self.prefetch + self.hold + 1, include_params=self.include_params,
            client_name=self.name, values_on_client=self.normalize_on is not None)

    def _open(self, pos):
        self.info()  # waits for a daemon that is starting; names an unknown dataset
        s: Union[Session, _pool.PoolSession]
        if self._pool is not None:
            s = _pool.PoolSession(self._pool, self._creds, self._open_msg(pos), lambda h: self._batches_at(pos, h),
                                  prefetch=self.prefetch, pin=self.pin, values_on=self.normalize_on,
                                  failover_after=self.failover_after, all_down_wait=self.reconnect_wait,
                                  connect_timeout=self.connect_timeout)
        else:
            s = Session(self._get_stub(), self._open_msg(pos), self._addr, pin=self.pin, values_on=self.normalize_on)
        h = s.header
        if (h.start_epoch, h.start_batch, h.start_offset) != pos:
            s.close()
            old = " (a daemon too old for an elastic resume ignores start_offset)" if pos[2] and not h.start_offset else ""
            raise ProtocolError(f"loaderd: asked to start at {pos}, the daemon starts at "
                                f"({h.start_epoch}, {h.start_batch}, {h.start_offset}){old}")
        return s

    def _batches_at(self, pos, header):
        """Batches of pos's epoch from its offset, under a stream's header."""
        if pos[2] == 0:
            return int(header.batches_per_epoch)
        n = int(header.epoch_samples) or int(header.dataset_size)  # 0 from a daemon older than the field
        return _batches_from(n, self.world_size, self.batch_size, self.sampler_drop_last,
                             self.drop_last, pos[2])

    def _take_session(self, pos):
        if self._warm is not None:
            s, at = self._warm, self._warm_pos
            self._warm = self._warm_pos = None
            if at == pos and not s.closed:
                return s
            s.close()
        return self._open(pos)

    def _park(self, session, pos):
        """Keep a finished epoch's stream: its next batches are prefetched."""
        self._close_warm()
        self._warm, self._warm_pos = session, pos

    def _close_warm(self):
        s, self._warm, self._warm_pos = self._warm, None, None
        if s is not None:
            s.close()

    def _reconnect(self, pos, old, err):
        """A new stream at pos after the daemon went away, waiting up to
        reconnect_wait for it to come back."""
        # Tensors the caller still holds keep their data (detached); their
        # acks go with the old stream.
        old.close()
        t0 = time.monotonic()
        deadline = t0 + self.reconnect_wait
        last, tries = err, 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Error(f"loaderd: the stream broke at epoch {pos[0]} batch {pos[1]} and loaderd at "
                            f"{self.address} did not come back within {self.reconnect_wait:g} s "
                            f"(waited {time.monotonic() - t0:.1f} s, {tries} attempts); last status: "
                            f"{last.status or last}", grpc.StatusCode.UNAVAILABLE) from err
            tries += 1
            try:
                _rpc.call_ready(self._get_stub().ListDatasets, pb.ListDatasetsRequest(), self._addr,
                                "reconnect", left)
                return self._open(pos)
            except Error as e:
                if e.code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise  # back, but refusing the stream (e.g. the dataset is gone)
                last = e
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


def _refuse_collating_dataloader():
    """Raise if a DataLoader with a batch_size (its default is 1) is
    creating this iterator: it would stack whole batches into [1, N, ...].

    Only the frame of DataLoader's fetcher is looked into: reading a
    frame's f_locals makes CPython keep a snapshot of its locals, which
    must never happen to the caller's own frames (it would keep their
    objects alive)."""
    if _FETCHER is None:
        return
    f = sys._getframe(2)  # 0: here, 1: Dataset.__iter__, 2: who called iter()
    if f is None or f.f_code is not _FETCHER_INIT:
        return
    fetcher = f.f_locals.get("self")
    if isinstance(fetcher, _FETCHER) and fetcher.auto_collation:
        raise Error("loaderd: a loaderd.Dataset yields whole batches, and this DataLoader would stack them "
                    "again (its default batch_size=1 makes [1, N, C, H, W]): use "
                    "DataLoader(ds, batch_size=None), or iterate the dataset directly; the daemon already "
                    "loads, augments and batches")


class BatchIterator:
    """One pass over a Dataset's batches; see Dataset for when memory is
    released. Independent of the dataset's other iterators."""

    def __init__(self, ds: Dataset, epochs: Optional[int], pairs: bool) -> None:
        if torch.utils.data.get_worker_info() is not None:
            # A forked worker inherits the parent's gRPC channel, which does
            # not survive fork(); and every worker would stream every batch.
            raise Error("loaderd: iterate a loaderd.Dataset in the main process: "
                        "DataLoader(ds, batch_size=None, num_workers=0), or no DataLoader at all "
                        "(the daemon does the loading)")
        if epochs is not None and epochs < 0:
            raise ValueError(f"loaderd: epochs {epochs} < 0")
        self._ds = ds
        self._pairs = pairs
        self._pos = ds._start()
        self._end = None if epochs is None else self._pos[0] + epochs
        if ds.epochs is not None:
            self._end = ds.epochs if self._end is None else min(self._end, ds.epochs)
        if ds._at_epoch_end(self._pos):
            # Nothing of that epoch is left: this loop yields no batch of
            # it, and the next epoch starts from its beginning.
            self._pos = (self._pos[0] + 1, 0, 0)
        self._session = None
        self._held: Deque[Batch] = collections.deque()
        self._done = False
        ds._iters.add(self)

    @property
    def position(self) -> Tuple[int, int]:
        """(epoch, batch) of the next batch this iterator returns."""
        return self._pos[:2]

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> Any:  # (images, labels) from iter(ds), a Batch from ds.batches()
        if self._done:
            raise StopIteration
        ds = self._ds
        try:
            while len(self._held) >= ds.hold:
                self._held.popleft().release()
            b = None
            if self._end is None or self._pos[0] < self._end:
                b = self._receive()
        except BaseException:
            # Ctrl-C (or any error) ends the stream; a failure to close must
            # not replace the exception the caller is to see.
            try:
                self.close()
            except Exception:
                pass
            raise
        if b is None:
            self._finish()
            raise StopIteration
        self._held.append(b)
        ds._pos, ds._resume = self._pos, False
        if not self._pairs:
            return b
        return tuple(b)  # images and labels: soft with mixing, multi-hot when multi-label (Batch.__iter__)

    def _receive(self):
        ds = self._ds
        s = self._session
        if s is None:
            s = self._session = ds._take_session(self._pos)
        if self._pos[2] and self._pos[1] == 0 and ds._batches_at(self._pos, s.header) == 0:
            # Nothing of the epoch is left for this world (an offset at its
            # end, or only a dropped tail): the stream starts at the next.
            self._pos = (self._pos[0] + 1, 0, 0)
            if self._end is not None and self._pos[0] >= self._end:
                return None
        for attempt in range(ds.reconnects + 1):
            try:
                b = s.next()
                break
            except Error as e:
                # UNAVAILABLE: the daemon is shutting down (its message names
                # the resume point) or gone (UnreachableError): resume.
                if e.code != grpc.StatusCode.UNAVAILABLE or attempt == ds.reconnects or ds._pool is not None:
                    raise  # a pool redials its daemons itself
                s = self._session = ds._reconnect(self._pos, s, e)
        if b is None:
            raise ProtocolError(f"loaderd: the stream ended before epoch {self._pos[0]} batch {self._pos[1]}")
        if (b.epoch, b.index) != self._pos[:2]:
            raise ProtocolError(f"loaderd: expected batch {self._pos[:2]}, got ({b.epoch}, {b.index})")
        nxt = (b.epoch, b.index + 1, self._pos[2])
        if nxt[1] >= ds._batches_at(self._pos, s.header):
            nxt = (b.epoch + 1, 0, 0)
        self._pos = nxt
        return b

    def _release_held(self):
        while self._held:
            self._held.popleft().release()

    def _finish(self):
        # A finished epoch keeps its stream for the next iterator: the next
        # epoch's batches are already in flight. The run's last epoch ends it.
        self._release_held()
        self._done = True
        ds = self._ds
        ds._pos, ds._resume = self._pos, False
        s, self._session = self._session, None
        if s is not None:
            if ds.epochs is not None and self._pos[0] >= ds.epochs:
                s.close()
            else:
                ds._park(s, self._pos)
        ds._iters.discard(self)

    def close(self) -> None:
        """Stop early: release held batches and end the stream. The
        dataset's position stays after the last batch returned (state_dict);
        its next iterator starts the epoch again."""
        if self._done:
            return
        self._done = True
        self._release_held()
        s, self._session = self._session, None
        if s is not None:
            s.close()
        if self._ds._iters is not None:
            self._ds._iters.discard(self)

    def __del__(self):
        if sys.is_finalizing():
            return
        try:
            self.close()
        except Exception:
            pass
