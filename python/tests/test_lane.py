"""The lane (ShmRegion.lane): a shared-memory stream's batches over the fd
socket instead of gRPC messages. Same batches as without it; frames read
whole however the socket splits them; a daemon that dies ends the stream
with its status, not a hang."""

import socket
import struct
import threading
import time

import pytest
import torch

import loaderd
from loaderd import _lane
from loaderd._errors import ProtocolError
from loaderd.v1 import loader_pb2 as pb
from conftest import Daemon


def _collect(ds):
    it = ds.batches()
    out, session = [], None
    for b in it:
        session = session or it._session
        p = b.params
        out.append((b.epoch, b.index, b.labels.clone(), b.indices.clone(), b.images.clone(),
                    None if p is None else (p.top.clone(), p.left.clone(), p.flip.clone())))
    return out, session


@pytest.mark.parametrize("kw", [{}, {"include_params": True}, {"normalize_on": "cpu"}],
                         ids=["plain", "params", "normalize_on"])
def test_lane_gives_the_grpc_batches(open_dataset, monkeypatch, kw):
    lane, s = _collect(open_dataset(transport="shm", **kw))
    assert s._lane is not None, "the stream did not take its batches over a lane"
    monkeypatch.setenv("LOADERD_SHM_LANE", "0")
    grpc_, s = _collect(open_dataset(transport="shm", **kw))
    assert s._lane is None
    assert len(lane) == len(grpc_) > 0
    for k, (a, b) in enumerate(zip(lane, grpc_)):
        assert a[:2] == b[:2], k
        for x, y in zip(a[2:5], b[2:5]):
            assert x.dtype == y.dtype and torch.equal(x, y), k
        assert a[2].dtype == torch.int64 and a[3].dtype == torch.int64
        if a[5] is None:
            assert b[5] is None
        else:
            assert all(torch.equal(x, y) for x, y in zip(a[5], b[5])), k


def _frame(seq, n, extra=b"", kind=_lane.BATCH):
    head = struct.pack("<IIQqqIIQqq", kind, n, seq, 7, seq, 3, len(extra), 1, 4096 * seq, 12 * n)
    body = struct.pack(f"<{n}q", *range(100 * seq, 100 * seq + n)) + struct.pack(f"<{n}i", *range(n))
    body += bytes(-len(body) % 8)
    return head + body + extra


def _serve(sock, data, chunk):
    def run():
        for i in range(0, len(data), chunk):
            sock.sendall(data[i:i + chunk])
            time.sleep(0)
        sock.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_lane_frames_however_split(chunk):
    big = pb.Batch(field_data=[bytes(range(256)) * 1024]).SerializeToString()  # past the first buffer
    frames = [_frame(0, 5), _frame(1, 3, big), _frame(2, 1)]
    a, b = socket.socketpair()
    with a, b:
        t = _serve(a, b"".join(frames) + struct.pack("<IIQqqIIQqq", _lane.END, *[0] * 9), chunk)
        lane = _lane.Lane(b, max_n=8, max_extra=1 << 20)
        got = [lane.next() for _ in range(3)]
        assert lane.next() is _lane.END
        assert lane.next() is _lane.END  # the end stays, though EOF follows it
        t.join()
    for f, n in zip(got, (5, 3, 1)):
        assert (f.n, f.epoch, f.index, f.slot, f.offset, f.length) == (n, 7, f.seq, 3, 4096 * f.seq, 12 * n)
        assert f.indices.tolist() == list(range(100 * f.seq, 100 * f.seq + n))
        assert f.labels.dtype == torch.int64 and f.labels.tolist() == list(range(n))
    assert [f.seq for f in got] == [0, 1, 2]
    assert got[0].extra is None and pb.Batch.FromString(got[1].extra).field_data[0] == bytes(range(256)) * 1024


@pytest.mark.parametrize("data, why", [
    (_frame(0, 9), "9 samples"),                 # more than a batch
    (_frame(0, 2, kind=5), "kind 5"),            # unknown kind
    (_frame(0, 2)[:70], None),                   # cut mid-frame: EOF, no frame
])
def test_lane_refuses_bad_frames(data, why):
    a, b = socket.socketpair()
    with a, b:
        t = _serve(a, data, 1 << 20)
        lane = _lane.Lane(b, max_n=8, max_extra=1 << 20)
        if why is None:
            assert lane.next() is None
        else:
            with pytest.raises(ProtocolError, match=why):
                lane.next()
        t.join()


def test_lane_daemon_killed(binary, data, tmp_path):
    """SIGKILL mid-stream: the client sees the lane close and raises the
    stream's status, promptly."""
    path, _, _ = data["c10"]
    d = Daemon(binary, tmp_path, {"c10": f"cifar:{path}"})
    d.start()
    try:
        ds = loaderd.Dataset(d.address, "c10", 64, seed=9, epochs=2, transport="shm", reconnects=0)
        it = ds.batches(None)
        next(it)
        assert it._session._lane is not None
        d.proc.kill()
        d.proc.wait()
        t0 = time.monotonic()
        with pytest.raises(loaderd.Error) as e:
            for _ in it:
                pass
        assert time.monotonic() - t0 < 10
        assert e.value.code is not None, e.value
        ds.close()
    finally:
        d.stop()


def test_lane_acks_wait_for_a_read_or_half_the_window():
    a, b = socket.socketpair()
    with a, b:
        lane = _lane.Lane(b, max_n=8, max_extra=0, window=4)
        a.setblocking(False)

        def sent():
            try:
                data = a.recv(1 << 10)
            except BlockingIOError:
                return []
            return [struct.unpack_from("<QQ", data, k)[0] for k in range(0, len(data), 16)]

        lane.ack(1, 10)
        assert sent() == []  # one of a window of 4: waits
        lane.ack(2, 10)
        assert sent() == [1, 2]  # half the window: sent
        lane.ack(3, -5)  # a negative wait goes as 0
        assert sent() == []
        a.sendall(_frame(0, 2))
        f = lane.next()  # the read sends what waits first
        assert f.seq == 0 and sent() == [3]
        lane.ack(4, 0)
        lane.close()  # a closed lane drops what waits: a forked child's copy is its parent's
        assert sent() == []
