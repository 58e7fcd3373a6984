"""The value ops on the client (Dataset's normalize_on): a stream opened with
values_on_client carries uint8 pixels, a quarter of f32's bytes, and its
header a table of what each byte of each channel becomes (the daemon's own
totensor, normalize and out= rounding, as the output element's bits). A
gather through that table on the target device gives the daemon's tensor
bit for bit."""

import sys
import warnings

import torch

from ._errors import ProtocolError
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

    def __call__(self, images):
        # int32 indices and index_select: on a CPU core a third of the time
        # of take, whose indices must be int64 (0.4 against 1.2 ms for
        # 224x224x3, torch 1.13).
        idx = images.to(self.offsets.device, non_blocking=True).int()
        idx += self.offsets
        return torch.index_select(self.table, 0, idx.reshape(-1)).view(idx.shape)
