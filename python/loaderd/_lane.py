"""The lane: a shared-memory stream's batch references and acks over the
daemon's fd socket instead of gRPC messages (ShmRegion.lane in
loader.proto).

Over gRPC, each batch costs this process a message handed from gRPC's
threads to the session's, and each ack one handed back: a few hundred
microseconds of CPU per batch, taken from the daemon's workers on a host
where every core makes batches. On the lane the caller's thread reads a
64-byte frame, the labels and the indices from a Unix socket and writes a
16-byte ack: tens of microseconds, and no thread in between. The gRPC stream
stays open beside it for the header and the status.

Set LOADERD_SHM_LANE=0 to keep the batches on the gRPC stream (to compare,
or to talk to a daemon whose lane misbehaves)."""

import os
import socket
import struct

import torch

from ._errors import ProtocolError

_HEAD = struct.Struct("<IIQqqIIQqq")  # kind n seq epoch index slot extra gen offset length
_ACK = struct.Struct("<QQ")  # seq wait_ns
BATCH, END = 1, 2

assert _HEAD.size == 64


def enabled():
    return os.environ.get("LOADERD_SHM_LANE", "1").strip().lower() not in ("0", "false", "no", "off")


class Frame:
    """One batch reference read from the lane."""
    __slots__ = ("seq", "epoch", "index", "n", "slot", "offset", "length", "indices", "labels", "extra")

    def __init__(self, seq, epoch, index, n, slot, offset, length, indices, labels, extra):
        self.seq, self.epoch, self.index, self.n = seq, epoch, index, n
        self.slot, self.offset, self.length = slot, offset, length
        self.indices, self.labels = indices, labels  # int64 tensors of n
        self.extra = extra  # the serialized rest (bytes), or None


class Lane:
    """The client's end of a stream's lane. Not safe for concurrent use."""

    # Waits on the socket are this long at most: a Ctrl-C delivered to
    # another thread interrupts nothing, and is seen when the wait ends.
    POLL = 0.5

    def __init__(self, sock, max_n, max_extra, window=2):
        self._sock = sock
        sock.settimeout(self.POLL)
        self._max_n, self._max_extra = max_n, max_extra
        self._buf = bytearray(1 << 16)
        self._start = self._end = 0  # buffered, unparsed bytes: _buf[_start:_end]
        # Acks wait here until the next read from the socket, or until half
        # the window is waiting: each write wakes the daemon's reader, and
        # a read that finds frames buffered needs no new ones yet.
        self._acks = []
        self._flush_at = max(1, window // 2)
        self.ended = False  # the end frame was read
        self.closed = False

    def _fill(self, need):
        """Buffer at least need bytes past _start; False at EOF first."""
        while self._end - self._start < need:
            if self._acks:
                self.flush()
            if len(self._buf) - self._start < need:  # move the rest to the front, grow if need be
                rest = self._end - self._start
                self._buf[:rest] = self._buf[self._start:self._end]
                self._start, self._end = 0, rest
                if len(self._buf) < need:
                    self._buf.extend(bytes(need - len(self._buf)))
            try:
                with memoryview(self._buf) as mv:
                    k = self._sock.recv_into(mv[self._end:])
            except socket.timeout:
                continue  # the wait is bounded (POLL); Ctrl-C is delivered between tries
            except OSError:
                return False
            if k == 0:
                return False
            self._end += k
        return True

    def next(self):
        """The next Frame; END after the stream finished with every batch
        acked (and at every call after); None when the daemon closed the
        lane without the end (the stream failed: its status says why)."""
        if self.ended:
            return END
        if not self._fill(_HEAD.size):
            return None
        kind, n, seq, epoch, index, slot, extra, _gen, offset, length = _HEAD.unpack_from(self._buf, self._start)
        if kind == END:
            self._start += _HEAD.size
            self.ended = True
            return END
        if kind != BATCH or not 0 < n <= self._max_n or extra > self._max_extra:
            raise ProtocolError(f"loaderd: lane frame of kind {kind} with {n} samples and {extra} bytes more "
                                f"(batches of at most {self._max_n} samples)")
        labels_at = _HEAD.size + 8 * n  # from the frame's start
        extra_at = labels_at + (4 * n + 7) // 8 * 8
        if not self._fill(extra_at + extra):
            return None
        base = self._start  # _fill may have moved the frame
        f = Frame(seq, epoch, index, n, slot, offset, length,
                  torch.frombuffer(self._buf, dtype=torch.int64, count=n, offset=base + _HEAD.size).clone(),
                  torch.frombuffer(self._buf, dtype=torch.int32, count=n, offset=base + labels_at).to(torch.int64),
                  bytes(self._buf[base + extra_at:base + extra_at + extra]) if extra else None)
        self._start = base + extra_at + extra
        if self._start == self._end:
            self._start = self._end = 0
        return f

    def ack(self, seq, wait_ns):
        """Hand batch seq back: at the next read, or now if half the window
        waits (see __init__)."""
        self._acks.append(_ACK.pack(seq, max(0, wait_ns)))
        if len(self._acks) >= self._flush_at:
            self.flush()

    def flush(self):
        """Send the acks waiting; a lane the daemon closed takes nothing
        (its stream is over, and the next read says so)."""
        acks, self._acks = self._acks, []
        if self.closed or not acks:
            return
        try:
            self._sock.sendall(b"".join(acks))
        except OSError:
            pass

    def close(self):
        """Close this process's end, dropping acks not yet sent (flush
        first to send them); in a forked child, only the child's descriptor
        (the parent's lane stays open, and the acks it copied are the
        parent's to send)."""
        if not self.closed:
            self.closed = True
            self._sock.close()
