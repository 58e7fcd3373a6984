"""One gRPC Stream: the Open, the header, then batches and their acks."""

import collections
import ctypes
import queue
import warnings

import grpc
import torch

from ._errors import Error, ProtocolError, from_rpc
from ._shm import Region, cuda_available
from .v1 import loader_pb2 as pb

DTYPES = {
    pb.DTYPE_U8: torch.uint8,
    pb.DTYPE_F32: torch.float32,
    pb.DTYPE_F16: torch.float16,
    pb.DTYPE_BF16: torch.bfloat16,
}

Params = collections.namedtuple("Params", "top left flip")
Params.__doc__ = """Each sample's random crop origin (top, left; int64, in the
padded image) and horizontal flip (bool), as tensors of length N."""


class Batch:
    """One batch: images, labels and where they came from.

    images is a view on the daemon's shared memory (transport "shm") or on
    the client's own buffer ring (transport "inline"). It stays valid until
    release(), which the iterator calls by itself (see Dataset); clone() to
    keep it longer. Every other field is an ordinary tensor or int the
    caller may keep.
    """

    __slots__ = ("images", "labels", "indices", "params", "epoch", "index", "seq", "_session", "_released")

    def __init__(self, session, seq, epoch, index, images, labels, indices, params):
        self._session = session
        self._released = False
        self.seq = seq            # position in its stream: 0, 1, 2, ...
        self.epoch = epoch        # epoch the batch belongs to
        self.index = index        # batch index within the epoch: (epoch, index) is a resume point
        self.images = images      # [N, C, H, W] (chw) or [N, H, W, C] (hwc)
        self.labels = labels      # int64 [N]
        self.indices = indices    # int64 [N]: dataset index of each sample
        self.params = params      # Params, or None unless include_params

    def release(self):
        """Give the batch's memory back to the daemon. Idempotent; images
        must not be used afterwards."""
        if not self._released:
            self._released = True
            self._session.release(self.seq)

    @property
    def released(self):
        return self._released

    def __iter__(self):
        # images, labels = batch
        return iter((self.images, self.labels))

    def __repr__(self):
        return (f"Batch(epoch={self.epoch}, index={self.index}, n={len(self.labels)}, "
                f"images={tuple(self.images.shape)} {self.images.dtype}{', released' if self._released else ''})")


def _long(values):
    # About 10 µs for 256 values, whichever way (list, numpy, fromiter).
    return torch.tensor(values, dtype=torch.int64)


class Session:
    """One open Stream. Not safe for concurrent use."""

    def __init__(self, stub, open_msg, pin=False, wait_for_ready=False):
        self._acks = queue.SimpleQueue()
        self.closed = False
        self._call = stub.Stream(self._requests(open_msg), wait_for_ready=wait_for_ready)
        try:
            first = next(self._call)
        except grpc.RpcError as e:
            self._stop()
            raise from_rpc(e, f"open {open_msg.dataset!r}") from None
        except StopIteration:
            self._stop()
            raise ProtocolError("loaderd: the daemon closed the stream before its header") from None
        if first.WhichOneof("msg") != "header":
            self._stop()
            raise ProtocolError("loaderd: the stream did not start with a header")
        h = self.header = first.header
        if h.dtype not in DTYPES:
            self._stop()
            raise ProtocolError(f"loaderd: unknown dtype {h.dtype} in the stream header")
        self.dtype = DTYPES[h.dtype]
        self.sample_shape = tuple(int(d) for d in h.sample_shape)
        self.window = max(1, int(h.max_in_flight))
        self.batches_per_epoch = int(h.batches_per_epoch)
        self._unacked = 0              # batches received, not yet acked
        self._events = collections.deque()  # (cuda event, seq): released, copy maybe running
        self._cuda = bool(pin) and cuda_available()
        self.region = None
        self._ring = None
        try:
            if h.transport == pb.TRANSPORT_SHM:
                self.region = Region(h.shm, pin)
            else:
                self._ring = self._make_ring(h, pin)
        except BaseException:
            self._stop()
            raise

    def _make_ring(self, h, pin):
        # One buffer per window position: the daemon sends seq+window only
        # after seq was acked, so buffer seq % window is free again by then.
        pin_memory = self._cuda
        if pin and not pin_memory:
            warnings.warn("loaderd: pin=True but CUDA is not available; batches stay in pageable memory",
                          RuntimeWarning, stacklevel=4)
        shape = (int(h.batch_size),) + self.sample_shape
        ring = [torch.empty(shape, dtype=self.dtype, pin_memory=pin_memory) for _ in range(self.window)]
        for t in ring:
            t.view(torch.uint8).zero_()  # fault the pages in now, not on the first batch
        return ring

    def _requests(self, open_msg):
        # gRPC consumes this generator on its own thread; acks reach it
        # through the queue, several per message when they pile up.
        yield pb.StreamRequest(open=open_msg)
        while True:
            seq = self._acks.get()
            if seq is None:
                return
            seqs = [seq]
            while True:
                try:
                    seq = self._acks.get_nowait()
                except queue.Empty:
                    break
                if seq is None:
                    yield pb.StreamRequest(ack=pb.Ack(seqs=seqs))
                    return
                seqs.append(seq)
            yield pb.StreamRequest(ack=pb.Ack(seqs=seqs))

    def next(self):
        """The next Batch, or None when the daemon ended the stream with OK."""
        if self.closed:
            raise Error("loaderd: stream closed")
        # The daemon sends nothing while every batch of the window is unacked:
        # then wait for the oldest pending CUDA copy instead of deadlocking.
        self._ack_finished_copies(self._unacked >= self.window)
        if self._unacked >= self.window:
            raise Error(f"loaderd: all {self.window} batches of the window are held; release one "
                        "(raise prefetch, or hold fewer)")
        try:
            reply = next(self._call)
        except StopIteration:
            return None
        except grpc.RpcError as e:
            raise from_rpc(e, "stream") from None
        if reply.WhichOneof("msg") != "batch":
            raise ProtocolError("loaderd: second stream header")
        b = reply.batch
        self._unacked += 1
        shape = tuple(b.shape)
        if b.dtype != self.header.dtype or shape[1:] != self.sample_shape or not 0 < shape[0] <= self.header.batch_size:
            raise ProtocolError(f"loaderd: batch {b.seq} has dtype {b.dtype} shape {shape}, "
                                f"the header said {self.header.dtype} {self.sample_shape}")
        which = b.WhichOneof("tensor")
        if which == "shm" and self.region is not None:
            if self._call.done() and self._call.code() != grpc.StatusCode.OK:
                # gRPC hands out messages it buffered before the stream
                # failed, but a failed stream's slots are no longer ours
                # ("valid until acked or the stream ends"): resume before it.
                raise from_rpc(self._call, f"stream (batch {b.seq} arrived after it ended)")
            images = self.region.view(b.shm.offset, b.shm.length, self.dtype, shape)
        elif which == "data" and self._ring is not None:
            images = self._ring[b.seq % self.window][:shape[0]]
            n = images.numel() * images.element_size()
            if len(b.data) != n:
                raise ProtocolError(f"loaderd: batch {b.seq} carries {len(b.data)} bytes, want {n}")
            ctypes.memmove(images.data_ptr(), b.data, n)
        else:
            raise ProtocolError(f"loaderd: batch {b.seq} carries {which or 'no tensor'} on a "
                                f"{'shm' if self.region is not None else 'inline'} stream")
        params = None
        if b.HasField("params"):
            p = b.params
            params = Params(_long(p.top), _long(p.left), torch.tensor(p.flip, dtype=torch.bool))
        return Batch(self, b.seq, b.epoch, b.batch_index, images, _long(b.labels), _long(b.indices), params)

    def release(self, seq):
        if self.closed:
            return
        if self._cuda:
            # A .cuda(non_blocking=True) copy of the batch may still be
            # running: ack once the current CUDA stream has passed this point.
            ev = torch.cuda.Event()
            ev.record()
            self._events.append((ev, seq))
            self._ack_finished_copies(False)
        else:
            self._ack(seq)

    def _ack(self, seq):
        self._unacked -= 1
        self._acks.put(seq)

    def _ack_finished_copies(self, block):
        while self._events:
            ev, seq = self._events[0]
            if not ev.query():
                if not block:
                    return
                ev.synchronize()
            self._events.popleft()
            self._ack(seq)

    def close(self):
        """End the stream; the daemon releases every slot it leased for it.
        Views on the shared region stay readable (the mapping lives as long
        as they do) but no longer belong to the caller."""
        if self.closed:
            return
        for ev, _ in self._events:
            ev.synchronize()  # no DMA from memory that is about to be unregistered
        self._events.clear()
        self.closed = True
        self._stop()
        if self.region is not None:
            self.region.unregister()

    def _stop(self):
        # Cancel first, then end the request generator: ending it first would
        # half-close the stream, and a daemon that keeps sending after a
        # half-close until the cancel lands miscounts its in-flight batches.
        self._call.cancel()
        self._acks.put(None)
