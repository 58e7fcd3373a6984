"""The value ops on the client (Dataset's normalize_on): a stream opened with
values_on_client carries uint8 pixels, a quarter of f32's bytes, and its
header a table of what each byte of each channel becomes (the daemon's own
totensor, normalize and out= rounding, as the output element's bits). A
gather through that table on the target device gives the daemon's tensor
bit for bit.

Faster where it is exact: torchvision's own arithmetic, x / 255, then
(x - mean) / std per channel, in float32, then the out= rounding. The
header carries no mean or std; Affine.find recovers them from the table
(its ends give them to a few units in the last place, and the neighbours
are tried) and keeps them only if the arithmetic, run on the device with
the batch's layout, gives every one of the table's 256 x C entries bit
for bit. A pixel is one of those 256 bytes, so the arithmetic then equals
the gather on every batch; where none fits (another op order, a device
whose division rounds otherwise), the gather stays."""

import itertools
import math
import sys
import warnings
from typing import Any

import numpy as np
import torch

from ._errors import ProtocolError
from ._shm import Ring
from .v1 import loader_pb2 as pb


def device(normalize_on):
    """normalize_on as a torch.device, or None (the daemon normalises)."""
    if normalize_on is None:
        return None
    try:
        return torch.device(normalize_on)
    except (RuntimeError, TypeError):
        raise ValueError(f"loaderd: normalize_on {normalize_on!r}: want None, 'cpu', 'cuda' or a torch.device") from None


def for_header(header, dev, dtypes):
    """The function a Session applies to each batch's images, for a stream
    that asked for values on the client."""
    if not header.value_table:
        # A daemon that predates values_on_client normalises itself; the
        # images still go to the device asked for.
        warnings.warn("loaderd: the daemon predates normalize_on (values_on_client): it sends "
                      f"{dtypes.get(header.dtype)} batches it normalised itself", RuntimeWarning, stacklevel=6)
        return lambda images: images.to(dev, non_blocking=True)
    return Values(header, dev, dtypes.get(header.value_dtype))


class Values:
    """The header's table on dev; calling it maps a uint8 batch."""

    def __init__(self, header, dev, dtype):
        chw = header.layout == pb.LAYOUT_CHW
        shape = tuple(header.sample_shape)
        c = shape[0] if chw else shape[-1] if shape else 0
        size = torch.empty((), dtype=dtype).element_size() if dtype is not None else 0
        if header.dtype != pb.DTYPE_U8 or not size or len(shape) != 3 or len(header.value_table) != c * 256 * size:
            raise ProtocolError(f"loaderd: value table of {len(header.value_table)} bytes of dtype {header.value_dtype} "
                                f"for samples of dtype {header.dtype}, shape {shape}: want {c} channels x 256 elements")
        raw = torch.frombuffer(bytearray(header.value_table), dtype=torch.uint8)
        if sys.byteorder != "little" and size > 1:
            raw = raw.view(-1, size).flip(1).reshape(-1)  # the table is little-endian
        self.dtype = dtype
        self.table = raw.view(dtype).to(dev)
        # Each channel's 256 entries follow the previous channel's: a
        # pixel's index is its byte plus 256 times its channel.
        self.offsets = (torch.arange(c, device=dev, dtype=torch.int32) * 256).view((1, c, 1, 1) if chw else (1, 1, 1, c))
        self.affine = Affine.find(raw.view(dtype).view(c, 256), chw, dev)
        # On a CPU the float32 batches go into buffers of a ring, each used
        # again once no view of it is left: a new tensor per batch (19 MB
        # for 32 images of 224x224x3) came from fresh pages that the kernel
        # zeroed and faulted in, a tenth of the trainer's CPU across hosts.
        self._out = None
        if dev.type == "cpu" and self.affine is not None and dtype == torch.float32:
            self._out = Ring(int(header.batch_size) * math.prod(shape) * 4, pin=False)

    @property
    def reads_bytes(self):
        """Whether a call may be given the received bytes as a read-only
        uint8 numpy array (no copy into a tensor first): the CPU's
        arithmetic reads them once, into its own buffer."""
        return self._out is not None

    def __call__(self, images):
        """A uint8 batch (a tensor; or a numpy array where reads_bytes)
        mapped, on the device."""
        if self._out is not None:
            buf = self._out.take()
            out = buf.view(math.prod(images.shape) * 4, torch.float32, tuple(images.shape))
            # Given back at once: take() hands it out again only once every
            # view of it, out's included, is gone.
            self._out.give(buf)
            return self.affine(images, out)
        if self.affine is not None:
            return self.affine(images)
        # int32 indices and index_select: on a CPU core a third of the time
        # of take, whose indices must be int64 (0.4 against 1.2 ms for
        # 224x224x3, torch 1.13).
        idx = images.to(self.offsets.device, non_blocking=True).int()
        idx += self.offsets
        return torch.index_select(self.table, 0, idx.reshape(-1)).view(idx.shape)


class Affine:
    """x / 255, then (x - mean) / std per channel (mean 0 and std 1 for a
    table of x / 255 alone), in float32, rounded to the table's dtype."""

    def __init__(self, mean, std, dtype, chw, dev):
        shape = (len(mean), 1, 1) if chw else (1, 1, len(mean))  # one image's
        self.mean = torch.tensor(mean, dtype=torch.float32).view(shape).to(dev)
        self.std = torch.tensor(std, dtype=torch.float32).view(shape).to(dev)
        self.plain = all(m == 0 for m in mean) and all(s == 1 for s in std)
        self.dtype = dtype

    def __call__(self, images, out=None):
        """images mapped; into out (float32, images' shape, on the device)
        where given. On a CPU images may be a numpy array."""
        x: Any = images
        dev = torch.device("cpu")
        if not isinstance(images, np.ndarray):
            x = images.to(self.mean.device, non_blocking=True)
            dev = x.device
        if out is None:
            out = torch.empty(tuple(x.shape), dtype=torch.float32, device=dev)
        # A CPU runs the four passes image by image, each image's float32
        # (600 KB at 224x224x3) staying in its cache between them: over a
        # whole batch at once every pass streams the batch through memory,
        # about twice the CPU here. A GPU takes the batch at once.
        pairs = zip(x, out) if dev.type == "cpu" else ((x, out),)
        for src, dst in pairs:
            if isinstance(src, np.ndarray):
                np.copyto(dst.numpy(), src, casting="unsafe")  # exact: every byte is a float32
            else:
                dst.copy_(src)
            dst.div_(255)
            if not self.plain:
                dst.sub_(self.mean).div_(self.std)
        return out if self.dtype == torch.float32 else out.to(self.dtype)

    # The daemon's named statistics (normalize=imagenet, normalize=cifar10)
    # are tried first: a float16 or bfloat16 table has too few bits for its
    # ends to recover mean and std, but these are what most specs name.
    PRESETS = (((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
               ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)))

    @classmethod
    def find(cls, table, chw, dev):
        """The Affine that gives table ([C, 256] of dtype) exactly on dev,
        or None."""
        c = table.shape[0]
        want = table.float().cpu().numpy().astype(np.float64)
        v = torch.arange(256, dtype=torch.float32).div_(255).numpy()
        per = []
        for ch in range(c):
            t0, t1 = want[ch, 0], want[ch, 255]
            if t1 == t0:
                return None
            # (v/255 - m) / s: 0 gives -m/s, 255 gives (1 - m)/s.
            s0 = np.float32(1 / (t1 - t0))
            m0 = np.float32(-t0 / (t1 - t0))
            presets = ((np.float32(pm[ch % 3]), np.float32(ps[ch % 3])) for pm, ps in cls.PRESETS)
            near = ((mk, sk) for sk in _near(s0) for mk in _near(m0))
            found = next(((float(mk), float(sk)) for mk, sk in itertools.chain(presets, near)
                          if np.array_equal(_round((v - mk) / sk, table.dtype), want[ch])), None)
            if found is None:
                return None
            per.append(found)
        aff = cls([m for m, _ in per], [s for _, s in per], table.dtype, chw, dev)
        # The device's own arithmetic, in the batch's layout, on every byte.
        probe = torch.arange(256, dtype=torch.uint8).repeat(c, 1).view(1, c, 16, 16)
        if not chw:
            probe = probe.permute(0, 2, 3, 1).contiguous()
        try:
            got = aff(probe.to(dev))
        except RuntimeError:
            return None
        if not chw:
            got = got.permute(0, 3, 1, 2)
        ok = torch.equal(_bits(got.reshape(c, 256).cpu()), _bits(table.cpu()))
        return aff if ok else None


def _near(x, k=4):
    """float32 x and its k neighbours on either side."""
    out, lo, hi = [x], x, x
    for _ in range(k):
        lo, hi = np.nextafter(lo, np.float32(-np.inf)), np.nextafter(hi, np.float32(np.inf))
        out += [lo, hi]
    return out


def _round(x, dtype):
    """float32 array x rounded to dtype, back as float64 for comparing."""
    return torch.from_numpy(np.asarray(x, dtype=np.float32)).to(dtype).double().numpy()


def _bits(t):
    return t.contiguous().view(torch.uint8)
