"""The daemon's shared-memory region, as one stream's client sees it.

The region is a memfd the daemon seals against writes (F_SEAL_FUTURE_WRITE):
no one else may map it writable and shared. The client gets a read-only
descriptor of it from the daemon's fd socket (SCM_RIGHTS, with the stream's
token) when it dialled the daemon's Unix socket, else by opening the /proc
path the header names.

Each slot is mapped once, privately (MAP_PRIVATE, PROT_READ|PROT_WRITE) and
pre-faulted for reading: reads go straight to the daemon's pages, no copy;
a write into a batch (an in-place op) copies the page it touches into this
process (copy on write), so it can never reach the daemon, another client,
or a later batch in the same slot. A batch's tensor is a view of its slot's
mapping made by torch.frombuffer, so the mapping object's reference count
says whether any tensor of that batch is still alive. A slot goes back to
the daemon only once none is:

- released and no view left: if a page was written (/proc/self/pagemap
  shows it anonymous), the private copies are dropped (MADV_DONTNEED) so
  the next batch in the slot reads the daemon's data again; then acked.
- a view kept past its release (images kept without clone()), when the
  daemon needs the slot or the stream ends: the batch is detached first:
  every page of it is copied into this process (MADV_POPULATE_WRITE), the
  slot gets a fresh mapping for its next batch, and the kept tensor keeps
  its data for as long as it lives.

So a tensor's data never changes under its holder, and nothing written
into one reaches another batch.
"""

import ctypes
import mmap
import os
import socket
import sys
from typing import Any, Optional

import torch

from ._errors import Error

PAGE = mmap.PAGESIZE
_MADV_DONTNEED = 4
_MADV_POPULATE_READ = 22   # Linux 5.14
_MADV_POPULATE_WRITE = 23  # Linux 5.14

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.madvise.restype = ctypes.c_int


def _madvise(addr, length, advice):
    """madvise over the whole pages of [addr, addr+length); False on error."""
    start = addr - addr % PAGE
    end = addr + length
    return _libc.madvise(start, end - start, advice) == 0


# Byte 7 of a pagemap entry holds bits 56..63: 0x80 present, 0x40 swapped,
# 0x20 file-page or shared-anon. Written since mapped from the file: present
# and not file, or swapped.
_WRITTEN = bytes(1 if (b & 0xE0) == 0x80 or b & 0x40 else 0 for b in range(256))


class _Pagemap:
    """Which pages of this process were written since they were mapped
    from a file (copied on write: anonymous now, or swapped out), from the
    entries of /proc/self/pagemap (about 25 µs for a 3 MiB batch here; the
    PAGEMAP_SCAN ioctl of Linux 6.7 was measured no faster)."""

    fd = None
    tried = False

    @classmethod
    def written(cls, addr, length):
        """True, False, or None when pagemap cannot be read."""
        if cls.fd is None:
            if cls.tried:
                return None
            cls.tried = True
            try:
                cls.fd = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
        first, last = addr // PAGE, (addr + length - 1) // PAGE
        try:
            data = os.pread(cls.fd, 8 * (last - first + 1), 8 * first)
        except OSError:
            return None
        return 1 in data[7::8].translate(_WRITTEN)


def after_fork():
    """In a forked child: the pagemap descriptor the parent opened reads
    the parent's page tables (/proc/self was the parent when it was
    opened); the child opens its own when it next needs one."""
    fd, _Pagemap.fd, _Pagemap.tried = _Pagemap.fd, None, False
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def fetch_fd(path, token, timeout=10.0, lane=False):
    """The region's read-only descriptor from the daemon's fd socket (see
    ShmRegion.fd_socket in loader.proto); with lane, (descriptor, the
    connection), which stays open as the stream's lane."""
    if not 0 < len(token) < 256:
        raise Error(f"loaderd: shared-memory token of {len(token)} bytes")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    keep = False
    try:
        s.settimeout(timeout)
        try:
            s.connect(path)
            s.sendall((b"\x00" if lane else b"") + bytes([len(token)]) + bytes(token))
            data, fds, _, _ = socket.recv_fds(s, 1, 4)
        except OSError as e:
            raise Error(f"loaderd: shared memory: fd socket {path}: {e}") from e
        try:
            if data == b"\x00" and len(fds) == 1:
                if lane:
                    keep = True
                    return fds.pop(), s
                return fds.pop()
            if not data:
                raise Error(f"loaderd: shared memory: fd socket {path} closed without an answer")
            if data == b"\x00":
                raise Error(f"loaderd: shared memory: fd socket {path} sent {len(fds)} descriptors, want 1")
            msg = b""
            while len(msg) < 4096:
                chunk = s.recv(4096)
                if not chunk:
                    break
                msg += chunk
            raise Error(f"loaderd: shared memory: fd socket {path} refused: "
                        f"{msg.decode('utf-8', 'replace').strip() or 'status ' + str(data[0])}")
        finally:
            for fd in fds:
                os.close(fd)
    finally:
        if not keep:
            s.close()


class SlotMap:
    """One slot's private mapping; the object views hold (see the module)."""

    __slots__ = ("mm", "addr", "size", "idle_refs", "__weakref__")

    def __init__(self, fd, offset, size):
        self.size = size
        self.mm = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
        t = torch.frombuffer(self.mm, dtype=torch.uint8, count=1)
        self.addr = t.data_ptr()
        del t
        # Page tables in one call, read-only: a first touch per page would
        # otherwise fault on the hot path. Without it (Linux < 5.14) pages
        # fault in as they are read.
        _madvise(self.addr, size, _MADV_POPULATE_READ)
        self.idle_refs = sys.getrefcount(self.mm)

    def viewed(self):
        """Whether any tensor over this mapping is alive."""
        return sys.getrefcount(self.mm) > self.idle_refs

    def view(self, delta, length, dtype, shape):
        t = torch.frombuffer(self.mm, dtype=torch.uint8, count=length, offset=delta)
        return t.view(dtype).view(shape)

    def scrub(self, delta, length):
        """Make [delta, delta+length) read the daemon's pages again, if
        the caller wrote into any of them."""
        w = _Pagemap.written(self.addr + delta, length)
        if w or w is None:
            _madvise(self.addr + delta, length, _MADV_DONTNEED)
            _madvise(self.addr + delta, length, _MADV_POPULATE_READ)

    def detach(self, delta, length):
        """Copy every page of [delta, delta+length) into this process, so
        the views over it keep their data once the daemon reuses the slot."""
        if not _madvise(self.addr + delta, length, _MADV_POPULATE_WRITE):
            start = (self.addr + delta) - (self.addr + delta) % PAGE
            end = self.addr + delta + length
            for p in range(start, end, PAGE):  # write each page's first byte back
                b = ctypes.c_uint8.from_address(p)
                b.value = b.value


class Region:
    """One stream's shared-memory region: its descriptor and slot maps."""

    def __init__(self, shm, address):
        self.size = int(shm.size)
        self.slot_size = int(shm.slot_size)
        self.slot_count = int(shm.slot_count)
        self.locked = bool(shm.locked)
        self.via = None
        self.lane_socket = None  # the stream's lane (shm.lane), which the caller takes over
        fd, why = None, []
        if shm.fd_socket and address.unix_path:
            sock = os.path.join(os.path.dirname(address.unix_path), shm.fd_socket)
            try:
                if shm.lane:
                    fd, self.lane_socket = fetch_fd(sock, shm.token, lane=True)
                else:
                    fd = fetch_fd(sock, shm.token)
                self.via = sock
            except Error as e:
                if shm.lane:  # the batches come only that way
                    raise
                why.append(str(e))
        if fd is None and shm.path:
            try:
                fd = os.open(shm.path, os.O_RDONLY | os.O_CLOEXEC)
                self.via = shm.path
            except OSError as e:
                why.append(f"open {shm.path}: {e.strerror}")
        if fd is None:
            if not why:
                why.append("the daemon named neither an fd socket nor a path")
            hint = "" if address.unix_path else " (over TCP only the /proc path works: connect over the daemon's Unix socket)"
            raise Error("loaderd: cannot open the daemon's shared memory (is the daemon on this host? "
                        f"transport='inline' works from anywhere){hint}: " + "; ".join(why))
        self._fd = fd
        self._slots = {}
        self.detached = 0  # batches copied because a view outlived their release

    def view(self, slot, offset, length, dtype, shape):
        """(images, slotmap, delta) for a batch at [offset, offset+length)."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise Error(f"loaderd: batch at {offset}+{length} lies outside the {self.size}-byte shared region")
        base = slot * self.slot_size
        if slot < self.slot_count and base <= offset and offset + length <= base + self.slot_size:
            sm = self._slots.get(slot)
            if sm is None:
                sm = self._slots[slot] = SlotMap(self._fd, base, self.slot_size)
        else:
            # Not where the slot layout says: a mapping for this batch alone.
            slot = None
            base = offset - offset % PAGE
            sm = SlotMap(self._fd, base, offset + length - base)
        delta = offset - base
        return sm.view(delta, length, dtype, shape), _Ref(slot, sm, delta, length)

    def keep_private(self, ref):
        """Before a fork(): copy a viewed batch's pages into this process,
        so the child inherits them as its own memory and not as the
        daemon's pages, which the daemon rewrites once this process hands
        the slot back. This process's views and bookkeeping are unchanged
        (the pages count as written: they are scrubbed at release)."""
        sm = ref.slotmap
        if sm is not None and sm.viewed():
            sm.detach(ref.delta, ref.length)

    def finish(self, ref, force):
        """Whether the batch's slot may go back to the daemon: True once no
        view of it is alive (after scrubbing written pages), or at once with
        force (a view is alive: detach it first)."""
        sm = ref.slotmap
        if sm.viewed():
            if not force:
                return False
            sm.detach(ref.delta, ref.length)
            self.detached += 1
            if ref.slot is not None and self._slots.get(ref.slot) is sm:
                del self._slots[ref.slot]  # the next batch in the slot maps it afresh
        elif ref.slot is not None and self._slots.get(ref.slot) is sm:
            sm.scrub(ref.delta, ref.length)
        ref.slotmap = None
        return True

    def close(self):
        self._slots.clear()  # unmapped with their last views
        fd, self._fd = self._fd, None  # cleared first: an interrupted close never closes it twice
        if fd is not None:
            os.close(fd)


class _Ref:
    __slots__ = ("slot", "slotmap", "delta", "length")

    def __init__(self, slot, slotmap, delta, length):
        self.slot, self.slotmap, self.delta, self.length = slot, slotmap, delta, length


class Ring:
    """Client-owned batch buffers (inline transport; shm with pin=True):
    each batch's tensor is a view of one buffer, which is reused only once
    no view of it is alive (and, with CUDA, once the copies queued from it
    have run). A buffer still viewed is left to its views, and a new one
    takes its place, so a kept tensor keeps its data."""

    def __init__(self, nbytes, pin):
        self.nbytes = nbytes
        self.pin = pin
        self._free = []
        self.allocated = 0

    def _new(self):
        if self.pin:
            t = torch.empty(self.nbytes, dtype=torch.uint8, pin_memory=True)
        else:
            t = torch.empty(self.nbytes, dtype=torch.uint8)
        t.zero_()  # fault the pages in now, not on the first batch
        self.allocated += 1
        buf = _Buf(t.numpy())
        buf.idle_refs = sys.getrefcount(buf.arr)  # here, with no argument or local holding it
        return buf

    def take(self):
        for i, b in enumerate(self._free):
            if b.ready():
                return self._free.pop(i)
        return self._new()

    def give(self, buf):
        """buf's batch was released: reuse it once its views are gone."""
        self._free.append(buf)
        if len(self._free) > 64:
            self._free = [b for b in self._free if b.ready()] or self._free[-64:]


class _Buf:
    __slots__ = ("arr", "addr", "idle_refs", "event")

    def __init__(self, arr):
        self.arr = arr  # numpy view of the buffer's tensor: views hold it
        self.addr = arr.ctypes.data
        self.event: Optional[Any] = None  # torch.cuda.Event of the last copy out of it, with CUDA
        self.idle_refs = 0  # set by Ring._new once the buffer is its own (never ready before)

    def ready(self):
        if sys.getrefcount(self.arr) > self.idle_refs:
            return False
        if self.event is not None:
            if not self.event.query():
                return False
            self.event = None
        return True

    def view(self, length, dtype, shape):
        return torch.frombuffer(self.arr, dtype=torch.uint8, count=length).view(dtype).view(shape)


def cuda_available():
    try:
        return torch.cuda.is_available()
    except Exception:  # a CPU-only build may raise instead of returning False
        return False
