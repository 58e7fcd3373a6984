"""A stream over a pool of daemons that serve the same datasets
("h1:p,h2:p" or "dns:///name:p"), delivering byte for byte what one daemon
would: the Go client's pool (client/poolsched.go), with threads.

Each daemon gets an on-demand stream with the same Open (_poolmember) and a
receiver thread. A scheduler thread (_poolsched) owns all the state: it wants each batch
number (0.. from the stream's start, across epochs) of one daemon, the one
expected to deliver soonest, at most WINDOW at a time each; acks each batch
on arrival to the stream it came on (a daemon's window never waits on the
caller, who may be waiting for an earlier batch another daemon owes); puts
batches back in order for the caller; asks the caller's next batch, and
what its slow daemon owes after it, of a second daemon when it is late
(the first copy wins); drops a daemon that failed, or owed batches and was
silent for failover_after, and asks what it owed of the others; redials
dropped daemons with backoff; looks a DNS name up again. A status no
daemon could do better with (DATA_LOSS, INVALID_ARGUMENT, INTERNAL, ...)
ends the stream after every batch before the failing one.
"""

import ctypes
import queue
import time
import warnings
from typing import Dict, List

import grpc
import numpy as np
import torch

from . import _address, _fields, _stream, _values
from ._batch import Batch, _long, mix_of, params_of
from ._errors import Error, ProtocolError
from ._poolmember import Numbering, code, same_stream, why
from ._poolsched import WINDOW, Scheduler
from ._shm import Ring, cuda_available
from .v1 import loader_pb2 as pb


class PoolSession:
    """One rank's stream over a pool (an _address.Pool): what
    _stream.Session is for one daemon, to the Dataset's iterator. Its
    caller's side; the Scheduler (_poolsched) runs the daemons."""

    def __init__(self, pool, creds, open_msg, batches_at, *, prefetch=4, pin=False, values_on=None,
                 failover_after=3.0, all_down_wait=10.0, connect_timeout=10.0):
        self.address, self.closed, self.failed = pool.text, False, None
        self.forked_from = None
        self._all_down_wait = float(all_down_wait)
        self._final = None
        self._bufs = {}
        o = pb.Open()
        o.CopyFrom(open_msg)
        o.on_demand, o.max_in_flight, o.transport = True, WINDOW, pb.TRANSPORT_INLINE
        try:
            addrs = _address.resolve(pool)
        except OSError as e:
            raise Error(f"loaderd: pool {pool.text}: cannot resolve {pool.host}: {e.strerror or e}",
                        grpc.StatusCode.UNAVAILABLE) from None
        if not addrs:
            raise Error(f"loaderd: pool {pool.text} names no daemon", grpc.StatusCode.UNAVAILABLE)
        self._sched = sched = Scheduler(pool, creds, o, addrs, failover_after)
        opened = sched.dial_all(connect_timeout)
        try:
            self.header = h = self._check(opened, f"open {o.dataset!r} on pool {pool.text}")
            if h.dtype not in _stream.DTYPES:
                raise ProtocolError(f"loaderd: unknown dtype {h.dtype} in the stream header of pool {pool.text}")
            self.dtype = _stream.DTYPES[h.dtype]
            self._esize = torch.empty((), dtype=self.dtype).element_size()
            self.sample_shape = tuple(int(d) for d in h.sample_shape)
            self.window = WINDOW
            self.batches_per_epoch = int(h.batches_per_epoch)
            self._values = _values.for_header(h, values_on, _stream.DTYPES) if values_on is not None else None
            self._cuda = bool(pin) and cuda_available()
            if pin and not self._cuda:
                warnings.warn("loaderd: pin=True but CUDA is not available; batches stay in pageable memory",
                              RuntimeWarning, stacklevel=5)
            self._ring = Ring(int(h.batch_size) * int(h.sample_bytes), pin=self._cuda)
            end = h.start_epoch + o.epochs if o.epochs else 0
            num = Numbering(h.start_epoch, h.start_batch, int(batches_at(h)), int(h.batches_per_epoch), end)
        except BaseException:
            sched.shutdown()  # a dial still under way closes what it opens
            for r in opened.values():
                if not isinstance(r, BaseException):
                    r.close()
            raise
        _stream._sessions.add(self)
        sched.start(h, num, prefetch, opened)

    @staticmethod
    def _check(opened, what):
        """The reference header, or an Error naming the daemons that do not
        agree (or, when none answered, each and why)."""
        ok = [(m, r) for m, r in opened.items() if not isinstance(r, BaseException)]
        if not ok:
            codes = {code(e) for e in opened.values()}
            raise Error(f"loaderd: {what}: no daemon answered: "
                        + ("; ".join(f"{m.addr.text}: {why(r)}" for m, r in opened.items()) or "none in time"),
                        codes.pop() if len(codes) == 1 else grpc.StatusCode.UNAVAILABLE)
        by_print: Dict[str, List[str]] = {}
        for m, r in ok:
            by_print.setdefault(r.header.fingerprint, []).append(m.addr.text)
        if "" in by_print:
            raise Error(f"loaderd: {what}: {', '.join(by_print[''])}: no dataset fingerprint (a daemon that predates "
                        "pools), so the pool cannot check they serve the same bytes", grpc.StatusCode.FAILED_PRECONDITION)
        if len(by_print) > 1:
            groups = sorted(f"{', '.join(a)} serve{'s' if len(a) == 1 else ''} {fp}" for fp, a in by_print.items())
            raise Error(f"loaderd: {what}: the daemons do not serve the same dataset: " + "; ".join(groups),
                        grpc.StatusCode.FAILED_PRECONDITION)
        ref = ok[0][1].header
        for m, r in ok:
            reason = same_stream(ref, r.header)
            if reason:
                raise Error(f"loaderd: {what}: daemon {m.addr.text}: {reason}", grpc.StatusCode.FAILED_PRECONDITION)
        return ref

    @property
    def unacked(self):
        return 0  # acked on arrival

    @property
    def detached(self):
        return 0

    def members(self):
        """Each daemon: address, up, batches made, outstanding, batch time
        (s), connects, last error."""
        return [m.report() for m in list(self._sched.members)]

    def next(self):
        """The next Batch, or None when the stream ended."""
        if self.forked_from is not None:
            raise _stream.forked_error(self.forked_from)
        if self.closed:
            raise Error("loaderd: stream closed")
        t0 = time.monotonic()
        while self._final is None:
            try:
                item = self._sched.ready.get(timeout=0.25)
            except queue.Empty:
                self._check_all_down(t0)
                continue
            if item[0] == "batch":
                self._sched.last_wait = int((time.monotonic() - t0) * 1e9)
                self._sched.events.put(("took",))
                return self._batch(*item[1:])
            self._final = item
        if self._final[0] == "error":
            self.failed = self._final[1]
            raise self._final[1]
        return None

    def _check_all_down(self, t0):
        since = self._sched.all_down_since
        if since is not None and time.monotonic() - max(since, t0) > self._all_down_wait:
            last = "; ".join(f"{m['address']}: {m['last_error']}" for m in self.members())
            raise Error(f"loaderd: every daemon of pool {self.address} has been down for "
                        f"{time.monotonic() - since:.1f} s, and none came back within {self._all_down_wait:g} s "
                        f"(reconnect_wait); last errors: {last}", grpc.StatusCode.UNAVAILABLE)

    def _batch(self, k, a, daemon):
        shape = a.shape
        if a.dtype != self.header.dtype or shape[1:] != self.sample_shape or not 0 < shape[0] <= self.header.batch_size:
            raise ProtocolError(f"loaderd: pool daemon {daemon} sent batch {k} of dtype {a.dtype} shape {shape}, "
                                f"the header said {self.header.dtype} {self.sample_shape}")
        length = self._esize
        for d in shape:
            length *= d
        if len(a.data) != length:
            raise ProtocolError(f"loaderd: pool daemon {daemon} sent batch {k} of {len(a.data)} bytes, want {length}")
        if self._values is not None and self._values.reads_bytes:
            # Mapped on the CPU straight from gRPC's bytes: no copy first.
            images = self._values(np.frombuffer(a.data, dtype=np.uint8, count=length).reshape(shape))
        else:
            buf = self._bufs[k] = self._ring.take()
            ctypes.memmove(buf.addr, np.frombuffer(a.data, dtype=np.uint8).ctypes.data, length)
            images = buf.view(length, self.dtype, shape)
            if self._values is not None:
                images = self._values(images)
        params = params_of(a.params) if a.params is not None else None
        labels = _long(a.labels)
        mix, soft = mix_of(self.header, a.mix, labels, images.device)
        fields = targets = None
        if a.msg is not None:
            fields, targets = _fields.fields_of(self.header, a.msg), _fields.targets_of(self.header, a.msg, images.device)
        return Batch(self, k, a.epoch, a.index, images, labels, _long(a.indices), params, mix, soft,
                             fields, targets)

    def release(self, seq):
        """The caller is done with batch seq: its buffer is reused once no
        view of it is left."""
        buf = self._bufs.pop(seq, None)
        if buf is not None and not self.closed:
            if self._cuda:
                ev = torch.cuda.Event()
                ev.record()
                buf.event = ev
            self._ring.give(buf)

    def poll(self):
        pass

    def _before_fork(self):
        pass  # inline: the batches are in buffers of this process

    def _forked(self, parent):
        """In a forked child: the scheduler's threads and the daemons'
        streams are the parent's (see _stream.after_fork)."""
        self.forked_from = parent
        self.closed = True

    def close(self):
        """End every daemon's stream; tensors the caller holds keep their data."""
        if self.closed:
            return
        self.closed = True
        self._sched.stop()
        _stream._sessions.discard(self)
