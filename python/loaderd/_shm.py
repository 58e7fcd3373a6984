"""Mapping the daemon's shared-memory region and registering it with CUDA."""

import mmap
import os
import warnings

import torch

from ._errors import Error

# cudaHostRegister flags (CUDA runtime API): Portable makes the registration
# valid in every CUDA context, so the choice of current device does not
# matter; ReadOnly (CUDA 11.1+) is needed only for a read-only mapping.
_HOST_REGISTER_PORTABLE = 0x01
_HOST_REGISTER_READ_ONLY = 0x08


class Region:
    """One stream's shared-memory region, mapped once.

    The mapping is writable when the daemon's memfd can be opened for
    writing (same user or root): a batch's slot belongs to the client until
    it is released, so in-place ops on a batch are harmless, whereas on a
    read-only mapping they would kill the process with SIGSEGV. The region
    is never unmapped explicitly: every tensor view holds a reference to the
    mmap, which is unmapped when the last view is garbage.
    """

    def __init__(self, shm, pin):
        self.path = shm.path
        self.size = int(shm.size)
        self.locked = bool(shm.locked)
        self.writable = True
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            self.writable = False
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as e:
                raise Error(f"loaderd: shared memory {self.path} (is the daemon on this host?): {e}") from e
        try:
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if self.writable else 0)
            # MAP_POPULATE fills the page tables in one call: a first touch
            # per page would otherwise cost a fault on the hot path.
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            self._mm = mmap.mmap(fd, self.size, flags=flags, prot=prot)
        except (OSError, ValueError) as e:
            raise Error(f"loaderd: map {self.path} ({self.size} bytes): {e}") from e
        finally:
            os.close(fd)
        with warnings.catch_warnings():
            # Only a read-only mapping warns; its tensors must not be written.
            warnings.simplefilter("ignore", UserWarning)
            self.u8 = torch.frombuffer(self._mm, dtype=torch.uint8)
        self._views = {}
        self.registered = False
        if pin:
            self.registered = register(self.u8, self.writable)

    def view(self, offset, length, dtype, shape):
        """A tensor of shape and dtype over [offset, offset+length)."""
        key = (offset, length, dtype, shape)
        t = self._views.get(key)
        if t is None:
            if offset < 0 or offset + length > self.size:
                raise Error(f"loaderd: batch at {offset}+{length} lies outside the {self.size}-byte shared region")
            t = self.u8[offset:offset + length].view(dtype).view(shape)
            # A stream uses few distinct (slot, n) pairs; the cache stays small.
            self._views[key] = t
        return t

    def unregister(self):
        if self.registered:
            unregister(self.u8)
            self.registered = False


def cuda_available():
    try:
        return torch.cuda.is_available()
    except Exception:  # a CPU-only build may raise instead of returning False
        return False


def register(t, writable=True):
    """Page-lock t's memory for CUDA DMA; False (with a warning) without CUDA."""
    if not cuda_available():
        warnings.warn("loaderd: pin=True but CUDA is not available; batches stay in pageable memory",
                      RuntimeWarning, stacklevel=3)
        return False
    flags = _HOST_REGISTER_PORTABLE | (0 if writable else _HOST_REGISTER_READ_ONLY)
    err = torch.cuda.cudart().cudaHostRegister(t.data_ptr(), t.numel() * t.element_size(), flags)
    if int(err) != 0:
        warnings.warn(f"loaderd: cudaHostRegister failed ({err}); batches stay in pageable memory",
                      RuntimeWarning, stacklevel=3)
        return False
    return True


def unregister(t):
    torch.cuda.cudart().cudaHostUnregister(t.data_ptr())
