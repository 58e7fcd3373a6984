"""One daemon of a pool stream (see _pool): its on-demand stream, opened
with the pool's Open; the checks that it makes the pool's batches; and the
numbering that names a batch to any daemon."""

import queue
import threading
import time
from typing import Optional

import grpc

from . import _rpc
from ._errors import Error, _status
from ._poolwire import Arrival, decode
from .v1 import loader_pb2 as pb

_STREAM = "/loaderd.v1.Loader/Stream"

# A daemon's status that ends the whole stream rather than its part in it:
# a sample that cannot be read cannot be read by any daemon serving the same
# bytes, and a refused want or a broken contract is a bug to report, not to
# ask again forever. Anything else (gone, stopping, overloaded, refusing this
# client) is the daemon's, and its batches go to the others.
FATAL = (grpc.StatusCode.DATA_LOSS, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INTERNAL,
         grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.UNIMPLEMENTED)


def code(err):
    return err.code() if isinstance(err, grpc.RpcError) and hasattr(err, "code") else getattr(err, "code", None)


def why(err):
    """An error in a few words: gRPC's "CODE: details", or its message."""
    if isinstance(err, grpc.RpcError):
        return _status(err)[1]
    return str(err).removeprefix("loaderd: ")


class Numbering:
    """Batch number k of a stream that starts at (epoch, batch), across
    epochs (the daemon's sampler.Numbering): first is the start epoch's
    batches from its offset, per the later epochs', end the first epoch not
    streamed (0: endless)."""

    def __init__(self, epoch, batch, first, per, end):
        self.epoch, self.batch, self.per, self.end = epoch, batch, per, end
        self.first = max(first - batch, 0)

    def at(self, k):
        """(epoch, batch index) of number k, or None past the end."""
        if k < 0 or self.per <= 0:
            return None
        if k < self.first:
            e, b = self.epoch, self.batch + k
        else:
            e, b = self.epoch + 1 + (k - self.first) // self.per, (k - self.first) % self.per
        return None if self.end and e >= self.end else (e, b)

    def count(self):
        """Batches in the stream; -1 when it is endless."""
        if not self.end:
            return -1
        return 0 if self.end <= self.epoch else self.first + (self.end - self.epoch - 1) * self.per


_SHAPE = ("dataset_size", "batches_per_epoch", "samples_per_epoch", "sample_bytes", "batch_size", "dtype",
          "layout", "augment", "value_dtype", "value_table")


def same_stream(ref, h):
    """Why header h of a daemon does not make the batches of the pool's
    reference header ref, or None."""
    if not h.fingerprint:
        return "it reports no dataset fingerprint (a daemon that predates pools), so the pool cannot check its bytes"
    if h.fingerprint != ref.fingerprint:
        return f"it serves other bytes (dataset fingerprint {h.fingerprint}, the pool's {ref.fingerprint})"
    diff = [f"{f} {getattr(h, f)!r:.40} (the pool's {getattr(ref, f)!r:.40})" for f in _SHAPE
            if getattr(h, f) != getattr(ref, f)]
    if diff:
        return "its stream differs from the pool's: " + ", ".join(diff)
    if (h.start_epoch, h.start_batch, h.start_offset) != (ref.start_epoch, ref.start_batch, ref.start_offset):
        return "it starts the stream elsewhere than the pool"
    return None


def _requests(first, q, done):
    """A member stream's requests: the Open, then Wants and Acks as the
    scheduler queues them, until None. Holds protobuf messages only (see
    _stream._requests for why)."""
    try:
        yield first
        while True:
            m = q.get()
            if m is None:
                return
            yield m
    finally:
        done.set()


class Conn:
    """One open on-demand stream of a daemon, on a connection of its own
    (one to a hung daemon may look open for minutes)."""

    def __init__(self, channel, call, q, done, header):
        self.channel, self.call, self._q, self._done, self.header = channel, call, q, done, header

    def want(self, k):
        self._q.put(pb.StreamRequest(want=pb.Want(batches=[k])))

    def ack(self, seq, wait_ns):
        self._q.put(pb.StreamRequest(ack=pb.Ack(seqs=[seq], wait_ns=[wait_ns])))

    def close(self):
        # Cancel, then end the requests (as Session._stop does): the daemon
        # releases what the stream held.
        self.call.cancel()
        self._q.put(None)
        self.channel.close()


def dial(addr, creds, open_msg, timeout, wait_for_ready):
    """Open an on-demand stream on the daemon at addr (an _address.Address)
    and read its header within timeout seconds; a Conn, or an Error."""
    try:  # a connection of its own: gRPC would share one to a hung daemon
        ch = _rpc.channel(addr, creds=creds, options=[("grpc.use_local_subchannel_pool", 1)])
    except (ValueError, Error) as e:  # credentials that cannot be used
        return Error(str(e))
    q: queue.SimpleQueue[Optional[pb.StreamRequest]] = queue.SimpleQueue()
    done = threading.Event()
    call = None
    try:
        stream = ch.stream_stream(_STREAM, request_serializer=pb.StreamRequest.SerializeToString,
                                  response_deserializer=decode)
        call = stream(_requests(pb.StreamRequest(open=open_msg), q, done), wait_for_ready=wait_for_ready)
        timer = threading.Timer(timeout, call.cancel)
        timer.daemon = True
        timer.start()
        try:
            first = next(call)
        finally:
            timer.cancel()
        if not isinstance(first, pb.StreamHeader):
            raise Error("the stream did not start with a header")
        if not first.on_demand:
            raise Error("the daemon predates on-demand streams: it cannot serve in a pool")
        return Conn(ch, call, q, done, first)
    except BaseException as e:
        if call is not None:
            call.cancel()
        q.put(None)
        ch.close()
        if isinstance(e, StopIteration):
            return Error("the daemon closed the stream before its header")
        if isinstance(e, grpc.RpcError) and e.code() == grpc.StatusCode.CANCELLED:
            return Error(f"no header within {timeout:g} s", grpc.StatusCode.DEADLINE_EXCEEDED)
        if isinstance(e, (grpc.RpcError, Error)):
            return e
        raise


class Member:
    """A daemon of the pool, as the scheduler sees it (only the scheduler
    touches it)."""

    def __init__(self, addr):
        self.addr = addr         # _address.Address
        self.conn = None         # Conn while up
        self.gen = 0             # counts its streams: an arrival counts only for the stream it came on
        self.dialling = False
        self.removed = False     # gone from the DNS name: no new work, no redial
        self.retry_at = 0.0
        self.backoff = 0.0
        self.wanted = []         # numbers wanted of it and not yet received, in order
        self.busy = 0.0          # since when it owes a batch without having sent one
        self.asked = 0.0         # when a batch was last wanted of it
        self.svc = 0.0           # recent seconds per batch, 0 until measured
        self.made = 0            # batches it made that the stream delivered
        self.connects = 0
        self.last_err = None

    @property
    def up(self):
        return self.conn is not None

    def receive(self, gen, call, events):
        """The receiver thread of stream gen (call): each batch (an
        Arrival) and finally why it stopped go to events."""
        err: Exception = Error("the daemon ended its on-demand stream")
        try:
            for a in call:
                if not isinstance(a, Arrival):
                    err = Error("second stream header")
                    break
                events.put(("batch", self, gen, a, time.monotonic()))
        except grpc.RpcError as e:
            err = e
        except Exception as e:  # a channel closed under the iterator
            err = e
        events.put(("error", self, gen, err))

    def report(self):
        return {"address": self.addr.text, "up": self.up, "made": self.made, "outstanding": len(self.wanted),
                "batch_time": self.svc, "connects": self.connects,
                "last_error": None if self.last_err is None else why(self.last_err)}
