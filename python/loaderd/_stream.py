"""One gRPC Stream: the Open, the header, then batches and their acks."""

import collections
import ctypes
import queue
import threading
import time
import warnings
import weakref
from typing import Any, List, Optional, Tuple

import grpc
import numpy as np
import torch

from . import _lane, _values
from ._batch import Batch, _long, mix_of, params_of
from ._fields import fields_of, targets_of
from ._errors import Error, ProtocolError, from_rpc
from ._shm import Region, Ring, cuda_available
from .v1 import loader_pb2 as pb

DTYPES = {
    pb.DTYPE_U8: torch.uint8,
    pb.DTYPE_F32: torch.float32,
    pb.DTYPE_F16: torch.float16,
    pb.DTYPE_BF16: torch.bfloat16,
}

_NO_EXTRA = pb.Batch()  # a lane frame with nothing more: read, never written
# A lane frame's serialized rest: a batch's fields (64 MiB at most, as the
# daemon bounds them; wire.MaxBatchFieldBytes) and room for params and mix.
_MAX_EXTRA = (64 << 20) + (16 << 20)


# Every open session, closed before the interpreter finalises (see
# Session.close for why that matters).
_sessions: weakref.WeakSet[Any] = weakref.WeakSet()  # Session and PoolSession


def close_all():
    for s in list(_sessions):
        try:
            s.close()
        except Exception:
            pass


def abandon(unix_path, why):
    """End now every open stream to the daemon on unix_path, which this
    process is about to stop (Daemon.stop): gRPC's graceful stop waits for
    each client connection to close, and a connection with a call still
    open on our side (an iterator from next(iter(ds)) that nobody advances)
    stays open until the daemon gives up on it five seconds later. Each
    such stream's next use raises why."""
    for s in list(_sessions):
        # (A pool's sessions have no single address: they are left alone.)
        if isinstance(s, Session) and getattr(s.address, "unix_path", None) == unix_path and not s.closed:
            try:
                s.abandon(why)
            except Exception:
                pass


def before_fork():
    """Before a fork(): the shared-memory batches this process views are
    copied into it, so that a child's tensors keep their data (see
    Region.keep_private)."""
    for s in list(_sessions):
        try:
            s._before_fork()
        except Exception:
            pass


def after_fork(parent):
    """In a forked child: every stream opened before the fork stays the
    parent's (its gRPC call, its request thread, the daemon's window). The
    child never touches them: each is marked closed, and using one raises
    an Error that says to start a new iterator. Returns them (the caller
    keeps them alive: freeing the parent's gRPC objects in the child may
    block)."""
    orphans = list(_sessions)
    for s in orphans:
        s._forked(parent)
    _sessions.clear()
    return orphans


def forked_error(parent):
    return Error(f"loaderd: this iterator's stream was opened by process {parent}, which forked this one, "
                 "and stays with it: start a new iterator in this process (iter(ds) or ds.batches()); "
                 "the Dataset itself works here, on a connection of its own")


# Queued for an empty Ack, sent as soon as the header arrives: the daemon
# plans one batch of a new stream until its client answers (a flood's
# streams never do), and a loop holds the batch it has while it waits for
# the next, so the first real Ack would come only after the second batch.
_HELLO = (-1, 0)


def _requests(open_msg, acks, done):
    """The request stream, consumed by gRPC on a thread of its own. It
    holds the Open, the ack queue and an Event, and nothing else: whatever
    it references is freed on that thread, and a torch tensor freed on a
    thread that outlives the interpreter's shutdown aborts the process."""
    try:
        yield pb.StreamRequest(open=open_msg)
        while True:
            item = acks.get()
            if item is None:
                return
            if item is _HELLO:
                yield pb.StreamRequest(ack=pb.Ack())
                continue
            seqs, waits = [item[0]], [item[1]]
            end = False
            while True:
                try:
                    item = acks.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    end = True
                    break
                if item is _HELLO:  # an Ack of its own is due; this one says more
                    continue
                seqs.append(item[0])
                waits.append(item[1])
            # wait_ns, parallel to seqs: how long the caller waited for each
            # batch (the daemon's client-wait histogram; --workers auto).
            yield pb.StreamRequest(ack=pb.Ack(seqs=seqs, wait_ns=waits))
            if end:
                return
    finally:
        done.set()


class _Flag:
    """A one-shot event another thread sets, waited for on the main thread
    with a plain lock: an interrupted lock.acquire leaves nothing behind,
    where a KeyboardInterrupt inside threading.Event.wait (a Condition) can
    surface as "cannot release un-acquired lock"."""
    __slots__ = ("_lock",)

    def __init__(self):
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self):
        if self._lock.locked():
            try:
                self._lock.release()
            except RuntimeError:
                pass  # set twice

    def wait(self, timeout):
        if self._lock.acquire(timeout=timeout):
            self._lock.release()
            return True
        return False


_END = object()  # the response stream ended with OK


def _read(call, want, replies, failed, done):
    """The response stream, read on a thread of its own: the session waits
    on the replies queue, where Ctrl-C interrupts it cleanly. gRPC's own
    waits are not safe to interrupt: a KeyboardInterrupt inside next(call)'s
    Condition.wait, or between its `with condition:` taking the lock and
    the block starting, leaves the call's lock held (the cancel or channel
    close at exit then hangs) or raises "cannot release un-acquired lock"
    from grpc/_channel.py. So every gRPC wait, and call.done(), happens
    here, where no signal is delivered.

    One message is read per token on want (None ends the thread), when the
    session asks, as next(call) on the caller's thread did: nothing is read
    ahead. Each reply goes with whether the call had already failed when it
    was handed out; the terminal item (_END, or the error, also appended to
    failed) goes last. The thread holds the call and the queues only (see
    _requests)."""
    try:
        while want.get() is not None:
            try:
                reply = next(call)
            except StopIteration:
                replies.put(_END)
                return
            replies.put((reply, call.done() and call.code() != grpc.StatusCode.OK))
    except BaseException as e:  # grpc.RpcError, or a closed channel's ValueError
        failed.append(e)
        replies.put(e)
    finally:
        done.set()


class _Rec:
    """A delivered batch the daemon still counts against the window."""
    __slots__ = ("seq", "ref", "released", "wait_ns")

    def __init__(self, seq, wait_ns):
        self.seq, self.ref, self.released = seq, None, False
        self.wait_ns = wait_ns  # how long next() blocked for it; sent on its ack


class Session:
    """One open Stream. Not safe for concurrent use."""

    def __init__(self, stub, open_msg, address, pin=False, values_on=None):
        self._acks: queue.SimpleQueue[Optional[Tuple[int, int]]] = queue.SimpleQueue()
        self._done = _Flag()
        # A token per message asked of the reader (_read); None ends it.
        self._want: queue.SimpleQueue[Optional[int]] = queue.SimpleQueue()
        self._asked = False  # a token is out: its reply comes next
        self._replies: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._read_done = _Flag()
        self._read_failed: List[BaseException] = []  # the reader's error, once the call failed
        self._reader = None
        self.closed = False
        self.failed = None
        self.forked_from = None  # the parent's pid, in a child forked while the stream was open
        self.abandoned = None  # the Error its next use raises, once its daemon was stopped (abandon)
        self.address = address
        self._recs = collections.OrderedDict()  # seq -> _Rec, unacked, in order
        self._bufs = {}  # seq -> ring buffer of a batch not yet released
        self.region = None
        self._ring = None
        self._lane = None  # the stream's lane, when the daemon agreed to one (_lane)
        if open_msg.transport == pb.TRANSPORT_SHM and address.unix_path and _lane.enabled():
            open_msg.shm_lane = True
        self._call = stub.Stream(_requests(open_msg, self._acks, self._done))
        _sessions.add(self)
        try:
            self._reader = threading.Thread(
                target=_read, args=(self._call, self._want, self._replies, self._read_failed, self._read_done),
                name="loaderd-stream", daemon=True)
            self._reader.start()
            first, _ = self._reply()
        except grpc.RpcError as e:
            self._stop()
            raise from_rpc(e, f"open {open_msg.dataset!r}", address) from None
        except StopIteration:
            self._stop()
            raise ProtocolError("loaderd: the daemon closed the stream before its header") from None
        except BaseException:
            self._stop()
            raise
        try:
            if first.WhichOneof("msg") != "header":
                raise ProtocolError("loaderd: the stream did not start with a header")
            h = self.header = first.header
            self._acks.put(_HELLO)
            if h.dtype not in DTYPES:
                raise ProtocolError(f"loaderd: unknown dtype {h.dtype} in the stream header")
            self.dtype = DTYPES[h.dtype]
            self._esize = torch.empty((), dtype=self.dtype).element_size()
            self.sample_shape = tuple(int(d) for d in h.sample_shape)
            self.window = max(1, int(h.max_in_flight))
            # Whether a lane frame's batch needs its serialized rest (_next_lane).
            self._needs_extra = bool(h.batch_mix or h.multi_label or len(h.field_names))
            self.batches_per_epoch = int(h.batches_per_epoch)
            # values_on: the device the value table maps batches on (normalize_on).
            self._values = _values.for_header(h, values_on, DTYPES) if values_on is not None else None
            self._cuda = bool(pin) and cuda_available()
            if pin and not self._cuda:
                warnings.warn("loaderd: pin=True but CUDA is not available; batches stay in pageable memory",
                              RuntimeWarning, stacklevel=5)
            nbytes = int(h.batch_size) * int(h.sample_bytes)
            if h.transport == pb.TRANSPORT_SHM:
                self.region = Region(h.shm, address)
                if self.region.lane_socket is not None:
                    self._lane = _lane.Lane(self.region.lane_socket, int(h.batch_size), _MAX_EXTRA, self.window)
                if self._cuda:
                    # Batches are copied into page-locked buffers of the
                    # client's own: DMA to the device, and the daemon's slot
                    # goes back at once.
                    self._ring = Ring(nbytes, pin=True)
            else:
                self._ring = Ring(nbytes, pin=self._cuda)
        except BaseException:
            self._stop()
            raise

    def __del__(self):
        # A session dropped unclosed: end its reader, which holds the call,
        # so that the call goes (and gRPC cancels it) as it did without one.
        try:
            self._want.put(None)
        except Exception:
            pass

    def _reply(self):
        """The next message of the response stream; raises StopIteration at
        its end and its RpcError after it failed, as next(call) does."""
        if not self._asked:
            self._asked = True
            self._want.put(1)
        while True:
            try:
                # A bounded wait in a loop: Ctrl-C is delivered between tries.
                item = self._replies.get(timeout=0.5)
                self._asked = False
                break
            except queue.Empty:
                continue
        if item is _END or isinstance(item, BaseException):
            self._replies.put(item)  # the stream stays ended for every later call
            if item is _END:
                raise StopIteration
            raise item
        return item

    @property
    def unacked(self):
        return len(self._recs)

    @property
    def detached(self):
        return self.region.detached if self.region is not None else 0

    def next(self):
        """The next Batch, or None when the daemon ended the stream with OK."""
        if self.forked_from is not None:
            raise forked_error(self.forked_from)
        if self.closed:
            raise self.abandoned or Error("loaderd: stream closed")
        self.poll()
        if len(self._recs) >= self.window:
            # The daemon sends nothing while the whole window is unacked.
            if not self._reclaim():
                raise Error(f"loaderd: all {self.window} batches of the window are held by the iterator; "
                            "release one (raise prefetch, or hold fewer)")
        t0 = time.monotonic_ns()
        if self._lane is not None and self.region is not None:
            return self._next_lane(self._lane, self.region, t0)
        try:
            reply, late = self._reply()
        except StopIteration:
            return None
        except grpc.RpcError as e:
            self.failed = e
            self._let_go()  # the daemon may reuse every slot now
            raise from_rpc(e, "stream", self.address) from None
        waited = time.monotonic_ns() - t0
        if reply.WhichOneof("msg") != "batch":
            raise ProtocolError("loaderd: second stream header")
        b = reply.batch
        shape = tuple(b.shape)
        if b.dtype != self.header.dtype or shape[1:] != self.sample_shape or not 0 < shape[0] <= self.header.batch_size:
            raise ProtocolError(f"loaderd: batch {b.seq} has dtype {b.dtype} shape {shape}, "
                                f"the header said {self.header.dtype} {self.sample_shape}")
        which = b.WhichOneof("tensor")
        rec = _Rec(b.seq, waited)
        self._recs[b.seq] = rec
        length = self._esize
        for d in shape:
            length *= d
        if which == "shm" and self.region is not None:
            if late or self._read_failed:
                # gRPC hands out messages it buffered before the stream
                # failed, but a failed stream's slots are no longer ours
                # ("valid until acked or the stream ends"): resume before it.
                err = self._read_failed[0] if self._read_failed else self._call
                if not isinstance(err, grpc.RpcError):
                    err = self._call
                self.failed = err
                self._let_go()
                raise from_rpc(err, f"stream (batch {b.seq} arrived after it ended)", self.address)
            images = self._shm_images(self.region, rec, b.shm.slot, b.shm.offset, b.shm.length, length, shape)
        elif which == "data" and self._ring is not None and self.region is None:
            if len(b.data) != length:
                raise ProtocolError(f"loaderd: batch {b.seq} carries {len(b.data)} bytes, want {length}")
            if self._values is not None and self._values.reads_bytes:
                # Mapped on the CPU straight from the message's bytes (_batch).
                images = np.frombuffer(b.data, dtype=np.uint8, count=length).reshape(shape)
            else:
                buf = self._bufs[b.seq] = self._ring.take()
                ctypes.memmove(buf.addr, b.data, length)
                images = buf.view(length, self.dtype, shape)
        else:
            raise ProtocolError(f"loaderd: batch {b.seq} carries {which or 'no tensor'} on a "
                                f"{'shm' if self.region is not None else 'inline'} stream")
        return self._batch(b.seq, b.epoch, b.batch_index, images, _long(b.labels), _long(b.indices), b)

    def _shm_images(self, region, rec, slot, offset, length, want, shape):
        """A batch's tensor in the region: a view, or with pin=True and CUDA
        a copy in a page-locked buffer (the slot then goes back at once)."""
        if length != want:
            raise ProtocolError(f"loaderd: batch {rec.seq} is {length} bytes in shared memory, want {want}")
        images, rec.ref = region.view(slot, offset, length, self.dtype, shape)
        if self._ring is not None:  # pin=True with CUDA: copy into a page-locked buffer
            buf = self._bufs[rec.seq] = self._ring.take()
            ctypes.memmove(buf.addr, images.data_ptr(), length)
            del images
            region.finish(rec.ref, force=False)
            self._ack(rec)  # the daemon's slot is free; the buffer is ours
            images = buf.view(length, self.dtype, shape)
        return images

    def _batch(self, seq, epoch, index, images, labels, indices, b):
        """The Batch, once its tensor is in hand; b holds the rest (params,
        mix, fields)."""
        if self._values is not None:
            images = self._values(images)
        params = params_of(b.params) if b.HasField("params") else None
        mix, soft = mix_of(self.header, b.mix if b.HasField("mix") else None, labels, images.device)
        n = len(labels)
        return Batch(self, seq, epoch, index, images, labels, indices, params, mix, soft,
                     fields_of(self.header, b, n), targets_of(self.header, b, images.device, n))

    def _next_lane(self, lane, region, t0):
        """next() on a stream whose batches come over the lane."""
        f = lane.next()
        if f is _lane.END:
            return None
        if f is None:  # the lane closed without its end: the stream's status says why
            self._let_go()
            try:
                reply, _ = self._reply()
            except StopIteration:
                raise ProtocolError("loaderd: the daemon closed the stream's lane before its end") from None
            except grpc.RpcError as e:
                self.failed = e
                raise from_rpc(e, "stream", self.address) from None
            raise ProtocolError(f"loaderd: a {reply.WhichOneof('msg')} on a stream whose batches go over its lane")
        rec = _Rec(f.seq, time.monotonic_ns() - t0)
        self._recs[f.seq] = rec
        shape = (f.n,) + self.sample_shape
        want = f.n * int(self.header.sample_bytes)
        images = self._shm_images(region, rec, f.slot, f.offset, f.length, want, shape)
        if f.extra is None and self._values is None and not self._needs_extra:
            return Batch(self, f.seq, f.epoch, f.index, images, f.labels, f.indices, None)
        rest = _NO_EXTRA
        if f.extra:
            rest = pb.Batch.FromString(f.extra)
            rest.seq = f.seq  # for the messages of what reads it
        return self._batch(f.seq, f.epoch, f.index, images, f.labels, f.indices, rest)

    def release(self, seq):
        """The caller is done with batch seq (see Batch.release)."""
        if self.closed:
            return
        buf = self._bufs.pop(seq, None)
        if buf is not None and self._ring is not None:  # a buffer comes only from the ring
            if self._cuda:
                # A .cuda(non_blocking=True) copy may still read the buffer:
                # it is reused once the current CUDA stream has passed here.
                ev = torch.cuda.Event()
                ev.record()
                buf.event = ev
            self._ring.give(buf)  # reused once no view of it is left
        rec = self._recs.get(seq)
        if rec is None:
            return  # acked already (copied into a pinned buffer)
        rec.released = True
        if rec.ref is None:
            self._ack(rec)  # inline: the window is flow control only

    def poll(self):
        """Ack every released batch whose views are all gone."""
        if self.region is None:
            return
        for rec in list(self._recs.values()):
            if rec.released and self.region.finish(rec.ref, force=False):
                self._ack(rec)

    def _reclaim(self):
        """Free window room when every unacked batch is released but some
        are still viewed: detach the oldest. False if none is released."""
        for rec in self._recs.values():
            if rec.released:
                if self.region is not None:
                    self.region.finish(rec.ref, force=True)
                self._ack(rec)
                return True
        return False

    def _ack(self, rec):
        del self._recs[rec.seq]
        if not self.closed:
            if self._lane is not None:
                self._lane.ack(rec.seq, rec.wait_ns)
            else:
                self._acks.put((rec.seq, rec.wait_ns))

    def _let_go(self):
        """The stream is over for the daemon: it may hand this stream's
        slots to anyone. Detach every batch a view still holds."""
        for rec in list(self._recs.values()):
            if rec.ref is not None and self.region is not None:
                self.region.finish(rec.ref, force=True)
            del self._recs[rec.seq]

    def close(self):
        """End the stream; the daemon releases every slot it leased for it.
        Tensors the caller still holds keep their data (detached)."""
        if self.closed:
            return
        try:
            self._let_go()
        finally:
            self.closed = True
            self._stop()
            if self.region is not None:
                self.region.close()

    def abandon(self, why):
        """Close the stream because its daemon is being stopped (see the
        module's abandon); its next use raises why."""
        self.abandoned = why
        self.close()

    def _before_fork(self):
        if self.region is not None and not self.closed:
            for rec in self._recs.values():
                if rec.ref is not None:
                    self.region.keep_private(rec.ref)

    def _forked(self, parent):
        """In a forked child (see after_fork): the call, its request
        thread and the daemon's slots are the parent's; views the child
        holds were made private before the fork (_before_fork)."""
        self.forked_from = parent
        self.closed = True
        self._recs.clear()
        if self._lane is not None:
            self._lane.close()  # the child's descriptor; the parent's lane stays open
        if self.region is not None:
            self.region.close()  # the child's copy of the descriptor; mappings go with their views

    def _stop(self):
        # Cancel first, then end the request generator: ending it first would
        # half-close the stream, and a daemon that keeps sending after a
        # half-close until the cancel lands miscounts its in-flight batches.
        self.closed = True
        _sessions.discard(self)
        if self._lane is not None:
            self._lane.flush()  # the waits they carry reach the daemon's metrics
            self._lane.close()
        # Acks still queued carry the caller's waits to the daemon's
        # metrics: give gRPC's request thread a moment to take them.
        for _ in range(20):
            if self._acks.empty() or self.abandoned:
                break
            time.sleep(0.01)
        self._call.cancel()
        self._acks.put(None)
        self._want.put(None)
        # gRPC's request thread ends once the generator has returned, and
        # the reader once the cancel lands; wait (briefly, interruptibly) so
        # that no thread of ours is left running into the interpreter's
        # shutdown. A request thread that stopped consuming at the cancel
        # never resumes the generator: not worth more than this.
        self._done.wait(0.5)
        if self._reader is not None:
            self._read_done.wait(0.5)
