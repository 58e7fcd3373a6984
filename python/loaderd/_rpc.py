"""Channels and the unary calls: ListDatasets, SampleNames, gRPC health."""

import collections
import time
from typing import List

import grpc

from . import _address, _creds
from ._errors import Error, UnreachableError, _status, from_rpc, is_unreachable
from .v1 import loader_pb2 as pb
from .v1 import loader_pb2_grpc as pb_grpc

DatasetInfo = collections.namedtuple("DatasetInfo", "name format size classes shape layout default_augment epoch_samples",
                                     defaults=(0,))
DatasetInfo.__doc__ = ("A dataset the daemon registered; shape is (height, width, channels); epoch_samples is a "
                       "shuffled epoch's length (samples=K under a weighted sampler; 0 from older daemons).")

MAX_NAMES = 10000  # SampleNames' page limit (loader.proto)
_LAYOUTS = {pb.LAYOUT_HWC: "hwc", pb.LAYOUT_CHW: "chw"}


def channel(address, options=(), creds=None, **kw):
    """A gRPC channel to a parsed or textual address, with the message size
    limits lifted: an inline batch of 256 f32 CIFAR images is 3 MiB, over
    gRPC's 4 MiB default at 512. TCP gets TLS and a bearer token as creds
    (a _creds.Credentials) or the keyword arguments tls, tls_ca, tls_cert,
    tls_key, tls_server_name, token, token_file, insecure say, each unset
    one from its LOADERD_* environment variable; plaintext without either."""
    a = _address.parse(address)
    opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    return _creds.channel(a, creds or _creds.resolve(**kw), opts + list(options))


def infos(resp):
    return [DatasetInfo(d.name, d.format, d.size, list(d.classes), (d.shape.height, d.shape.width, d.shape.channels),
                        _LAYOUTS.get(d.layout), d.default_augment, d.epoch_samples) for d in resp.datasets]


def call_ready(fn, request, address, what, connect_timeout):
    """fn(request) with wait_for_ready: a daemon still starting is waited
    for up to connect_timeout seconds (0: fail at once if it is not up)."""
    a = _address.parse(address)
    t0 = time.monotonic()
    try:
        if connect_timeout and connect_timeout > 0:
            return fn(request, wait_for_ready=True, timeout=connect_timeout)
        return fn(request, timeout=30)
    except grpc.RpcError as e:
        waited = time.monotonic() - t0 if connect_timeout and connect_timeout > 0 else None
        raise from_rpc(e, what, a, waited and connect_timeout) from None


def call_pool(pool, creds, method, request, what, connect_timeout):
    """A unary call (method: a Loader method's name) on the first daemon of
    a pool (_address.Pool) that answers, the members tried in turn until
    one does or connect_timeout seconds have passed."""
    deadline = time.monotonic() + max(connect_timeout or 0, 0)
    why = {}
    while True:
        try:
            members = _address.resolve(pool)
        except OSError as e:
            members, why[pool.text] = [], f"cannot resolve {pool.host}: {e.strerror or e}"
        for a in members:
            with channel(a, creds=creds) as ch:
                try:
                    return getattr(pb_grpc.LoaderStub(ch), method)(request, timeout=2.0)
                except grpc.RpcError as e:
                    if not is_unreachable(e):
                        raise from_rpc(e, f"{what} (pool daemon {a.text})") from None
                    why[a.text] = _status(e)[1]
        if time.monotonic() >= deadline:
            raise UnreachableError(f"loaderd: {what}: no daemon of pool {pool.text} answered"
                                   f"{f' within {connect_timeout:g} s' if connect_timeout else ''}: "
                                   + "; ".join(f"{k}: {v}" for k, v in why.items()), grpc.StatusCode.UNAVAILABLE)
        time.sleep(0.2)


def call(address, method, request, what, connect_timeout, creds=None):
    """A unary call on the daemon at address, or on a pool's first daemon
    that answers."""
    creds = creds or _creds.resolve()
    t = _address.parse_target(address)
    if isinstance(t, _address.Pool):
        return call_pool(t, creds, method, request, what, connect_timeout)
    with channel(t, creds=creds) as ch:
        return call_ready(getattr(pb_grpc.LoaderStub(ch), method), request, t, what, connect_timeout)


def list_datasets(address, connect_timeout=10.0, timeout=None, **creds):
    """The datasets a daemon serves (of a pool, the first daemon that
    answers), as DatasetInfo tuples sorted by name. Waits up to
    connect_timeout seconds for a daemon that is starting (timeout is its
    former name). creds: TLS and token (see channel)."""
    if timeout is not None:
        connect_timeout = timeout
    t = _address.parse_target(address)
    resp = call(t, "ListDatasets", pb.ListDatasetsRequest(), f"list datasets at {t.text}", connect_timeout,
                _creds.resolve(**creds))
    return infos(resp)


def names_page(stub, address, dataset, start, count, connect_timeout):
    req = pb.SampleNamesRequest(dataset=dataset, start=start, count=count)
    return call_ready(stub.SampleNames, req, address, f"sample names of {dataset!r}", connect_timeout)


def sample_names(address, dataset, start=0, count=None, connect_timeout=10.0, **creds):
    """Names of the samples start .. start+count-1 of a dataset (count None:
    to the end): each file's or archive member's name, or the decimal index
    for a source without names. Fetched in pages of 10,000 (of a pool, from
    the first daemon that answers). creds: TLS and token (see channel)."""
    t = _address.parse_target(address)
    if start < 0 or (count is not None and count < 0):
        raise ValueError(f"loaderd: sample_names start {start}, count {count}")
    c = _creds.resolve(**creds)
    out: List[str] = []
    pos = start
    ch = None if isinstance(t, _address.Pool) else channel(t, creds=c)
    try:
        while count is None or len(out) < count:
            want = MAX_NAMES if count is None else min(MAX_NAMES, count - len(out))
            if ch is not None:
                r = names_page(pb_grpc.LoaderStub(ch), t, dataset, pos, want, connect_timeout)
            else:
                req = pb.SampleNamesRequest(dataset=dataset, start=pos, count=want)
                r = call_pool(t, c, "SampleNames", req, f"sample names of {dataset!r}", connect_timeout)
            if not r.names:
                break
            out.extend(r.names)
            pos += len(r.names)
            if pos >= r.size:
                break
    finally:
        if ch is not None:
            ch.close()
    return out


# gRPC health checking (grpc.health.v1), spoken by hand so that no
# grpcio-health-checking package is needed: HealthCheckRequest{service=1}
# and HealthCheckResponse{status=1}, SERVING = 1.
_HEALTH = "/grpc.health.v1.Health/Check"
_SERVING = 1
HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _health_request(service):
    b = service.encode()
    if not b:
        return b""
    if len(b) > 127:
        raise ValueError("service name too long")
    return b"\x0a" + bytes([len(b)]) + b


def _health_status(data):
    # The response's only field is status (field 1, varint); 0 is omitted.
    i = 0
    while i < len(data):
        key = data[i]
        i += 1
        if key == 0x08:
            v, shift = 0, 0
            while True:
                c = data[i]
                i += 1
                v |= (c & 0x7F) << shift
                shift += 7
                if not c & 0x80:
                    return v
        raise Error(f"loaderd: unexpected health response {data!r}")
    return 0


def health(ch, service="loaderd.v1.Loader", timeout=1.0, wait_for_ready=False):
    """The daemon's health status for service ("SERVING", "NOT_SERVING",
    ...) over a channel; raises grpc.RpcError when nobody answers."""
    check = ch.unary_unary(_HEALTH, request_serializer=lambda x: x, response_deserializer=lambda x: x)
    data = check(_health_request(service), timeout=timeout, wait_for_ready=wait_for_ready)
    return HEALTH_STATUS.get(_health_status(data), "UNKNOWN")
