"""Map-style access: GetSamples, and its samples as tensors."""

import operator

import grpc
import numpy as np
import torch

from ._errors import Error
from .v1 import loader_pb2 as pb

# Indices of a get()'s first call, well below GetSamples' 1024 (loader.proto):
# a call's answer is held whole in memory; halved while the daemon's 256 MiB
# bound refuses one.
FIRST_CHUNK = 64

_NUMPY = {pb.DTYPE_U8: np.uint8, pb.DTYPE_F32: np.float32, pb.DTYPE_F16: np.float16}


def indices(ids, size):
    """ids (ints, a tensor, an array) as dataset indices, negative ones
    counted from the end as Python does; IndexError names one outside."""
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    out = []
    for i in ids:
        try:
            i = operator.index(i)
        except TypeError:
            raise TypeError(f"loaderd: index {i!r}: ds[i] takes an int, 0 <= i < ds.dataset_size (negative from the "
                            "end), or a slice, and ds.get a list of ints; iterate the dataset for batches") from None
        j = i + size if i < 0 else i
        if not 0 <= j < size:
            raise IndexError(f"loaderd: index {i} out of range for a dataset of {size} samples")
        out.append(j)
    return out


def tensor(s, dtype, layout):
    """A GetSamplesResponse.Sample as a tensor of its own shape, dtype and
    layout (a copy: the message's bytes are read-only)."""
    shape = tuple(int(d) for d in s.shape)
    if dtype == pb.DTYPE_BF16:
        t = torch.frombuffer(bytearray(s.data), dtype=torch.bfloat16).reshape(shape)
    elif dtype in _NUMPY:
        t = torch.from_numpy(np.frombuffer(s.data, dtype=_NUMPY[dtype]).reshape(shape).copy())
    else:
        raise Error(f"loaderd: GetSamples answered dtype {dtype}, which this client does not know")
    return t


def get(call, request, ids):
    """(tensor, label) of each of ids, from GetSamples calls of request's
    form: call(request) makes one. A raw decode (uint8 HWC, no spec)
    becomes CHW, as torchvision's pil_to_tensor makes it; a spec's output
    keeps the layout the daemon gave it. Calls carry FIRST_CHUNK indices at most,
    fewer while the daemon's byte bound refuses them."""
    out = []
    chunk = FIRST_CHUNK
    pos = 0
    while pos < len(ids):
        part = ids[pos:pos + chunk]
        req = pb.GetSamplesRequest()
        req.CopyFrom(request)
        req.indices.extend(part)
        try:
            resp = call(req)
        except Error as e:
            if e.code == grpc.StatusCode.INVALID_ARGUMENT and "-byte limit" in str(e) and chunk > 1:
                chunk //= 2
                continue
            raise
        for s in resp.samples:
            t = tensor(s, resp.dtype, resp.layout)
            if resp.dtype == pb.DTYPE_U8 and resp.layout == pb.LAYOUT_HWC and not resp.augment:
                t = t.permute(2, 0, 1).contiguous()
            out.append((t, int(s.label)))
        pos += len(part)
    return out
