"""A pool stream's replies, decoded without copying the tensor: protobuf
parses a batch of 224x224x3 uint8 images (4.8 MB) by copying its data
into the message, and copies it again at every access of the field (about
110 µs of CPU per image received, more than gRPC's own receive). Here
only the field's place in gRPC's bytes is found, by walking the wire
format's tags; protobuf still parses every other field."""

import collections

from ._errors import ProtocolError
from .v1 import loader_pb2 as pb

_HEADER = pb.StreamReply.DESCRIPTOR.fields_by_name["header"].number
_BATCH = pb.StreamReply.DESCRIPTOR.fields_by_name["batch"].number
_DATA = pb.Batch.DESCRIPTOR.fields_by_name["data"].number
_LEN = 2  # wire type of a length-delimited field

# A batch's fields as plain Python values, its data a memoryview on the
# received bytes; no tensor is made off the caller's thread (see
# _stream._requests).
# msg is the Batch message but its tensor, for its extra fields and label
# sets (_fields).
Arrival = collections.namedtuple("Arrival", "seq epoch index shape dtype labels indices params data mix msg",
                                 defaults=(None, None))


def _varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i
        shift += 7


def _field(buf, i):
    """The field at i: (number, wire type, start of its value, its end)."""
    key, i = _varint(buf, i)
    wt = key & 7
    if wt == 0:
        end = _varint(buf, i)[1]
    elif wt == 1:
        end = i + 8
    elif wt == _LEN:
        n, i = _varint(buf, i)
        end = i + n
    elif wt == 5:
        end = i + 4
    else:
        raise ProtocolError(f"loaderd: a stream message with wire type {wt}")
    return key >> 3, wt, i, end


def decode(raw):
    """A StreamReply's bytes as a StreamHeader or an Arrival; gRPC calls it
    (a response deserializer)."""
    try:
        mv, i, out = memoryview(raw), 0, None
        while i < len(raw):
            num, wt, s, e = _field(raw, i)
            if e > len(raw):
                raise IndexError
            if num == _HEADER and wt == _LEN:
                out = pb.StreamHeader.FromString(mv[s:e])
            elif num == _BATCH and wt == _LEN:
                out = _batch(raw, mv, s, e)
            i = e
    except IndexError:
        raise ProtocolError("loaderd: a truncated stream message") from None
    if out is None:
        raise ProtocolError("loaderd: a stream message with neither a header nor a batch")
    return out


def _batch(raw, mv, i, end):
    rest, data = [], mv[0:0]
    while i < end:
        num, wt, s, e = _field(raw, i)
        if num == _DATA and wt == _LEN:
            data = mv[s:e]
        else:
            rest.append(mv[i:e])
        i = e
    b = pb.Batch.FromString(b"".join(rest))
    p = b.params if b.HasField("params") else None
    m = b.mix if b.HasField("mix") else None
    return Arrival(b.seq, b.epoch, b.batch_index, tuple(b.shape), b.dtype, list(b.labels), list(b.indices), p, data, m, b)
