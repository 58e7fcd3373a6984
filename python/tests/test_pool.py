"""A pool of daemons serving the same dataset ("a,b,c" or dns:///name:port):
the stream is spread over them and delivers byte for byte what one daemon
does, through a daemon killed or hung, refuses daemons with other data at
open, ends at a sample none can read, and says when every daemon is gone."""

import hashlib
import logging
import signal
import threading
import time

import grpc
import numpy as np
import pytest
import torch
from PIL import Image

import loaderd
from conftest import Daemon, free_port
from loaderd import _address, _poolsched
from loaderd.v1 import loader_pb2 as pb
from test_security import _ca, _issue

SPEC = "train=synthetic:1200?seed=3"
KW = dict(seed=11, epochs=5, include_params=True)
START = {"epoch": 1, "batch": 3, "offset": 0, "dataset": "train", "seed": 11, "shuffle": True,
         "sampler_drop_last": False, "rank": 0, "world_size": 1, "batch_size": 8, "drop_last": False}


def digest(b):
    """One delivered batch: its place, samples, labels, parameters and bits."""
    h = hashlib.sha256(np.array([b.seq, b.epoch, b.index], dtype=np.int64).tobytes())
    for t in (b.indices, b.labels, *(b.params or ())):
        if t is not None:
            h.update(t.numpy().tobytes())
    h.update(b.images.contiguous().view(torch.uint8).numpy().tobytes())
    return f"{b.epoch}/{b.index}:{h.hexdigest()[:16]}"


def start_daemons(binary, tmp_path, specs, args=()):
    ds = []
    try:
        for i, spec in enumerate(specs):
            (tmp_path / f"d{i}").mkdir()
            name, _, source = spec.partition("=")
            d = Daemon(binary, tmp_path / f"d{i}", {name: source}, args)
            d.start()
            ds.append(d)
    except BaseException:
        stop_all(ds)
        raise
    return ds


def stop_all(ds):
    """Stop daemons (a hung one too) at once rather than one after another."""
    for d in ds:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.send_signal(signal.SIGCONT)
            d.proc.send_signal(signal.SIGTERM)
    for d in ds:
        d.stop()


@pytest.fixture
def pool3(binary, tmp_path):
    ds = start_daemons(binary, tmp_path, [SPEC] * 3)
    yield ds
    stop_all(ds)


def target(ds):
    return ",".join(d.address for d in ds)


def collect(ds, at=None, deadline=60):
    """Every batch of ds's stream as digests, and the longest the caller
    waited for one; at(n) runs after batch n. On a thread, so that a stalled
    stream fails the test instead of hanging it."""
    out, waits, err = [], [0.0], []

    def run():
        try:
            it = ds.batches(None)
            while True:
                t0 = time.monotonic()
                b = next(it, None)
                if b is None:
                    return
                waits.append(time.monotonic() - t0)
                out.append(digest(b))
                if at is not None:
                    at(len(out), it)
        except BaseException as e:  # re-raised below
            err.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(deadline)
    assert not t.is_alive(), f"the stream stalled after {len(out)} batches"
    if err:
        raise err[0]
    return out, max(waits)


def reference(d, **kw):
    ds = loaderd.Dataset(d.address, "train", 8, transport="inline", **KW, **kw)
    ds.load_state_dict(START)
    out, _ = collect(ds)
    ds.close()
    return out


@pytest.mark.parametrize("fault", [None, "kill", "hang"])
def test_pool_delivers_what_one_daemon_does(pool3, fault, caplog):
    caplog.set_level(logging.INFO, logger="loaderd.pool")
    want = reference(pool3[0])
    victim = pool3[2]
    made = {}

    def at(n, it):
        # A training step: the stream outlasts the victim being asked again
        # (an idle daemon is, after 1 s) and failover_after.
        time.sleep(0.005)
        if n == 2:
            made["session"] = it._session
        if n == 40 and fault == "kill":
            victim.proc.kill()
        if n == 40 and fault == "hang":
            victim.proc.send_signal(signal.SIGSTOP)

    ds = loaderd.Dataset(target(pool3), "train", 8, failover_after=0.5, **KW)
    ds.load_state_dict(START)  # a resumed stream: numbers count from (1, 3)
    got, longest = collect(ds, at)
    assert len(got) == len(want) and got == want, \
        f"first difference at batch {next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)}"
    assert ds.state_dict()["epoch"] == KW["epochs"] and ds.position == (KW["epochs"], 0)
    members = made["session"].members()
    assert [m["address"] for m in members] == [d.address for d in pool3]
    assert all(m["made"] > 0 for m in members), members  # every daemon made some
    down = [r.getMessage() for r in caplog.records if f"daemon {victim.address} down" in r.getMessage()]
    if fault == "kill":
        assert down, "the killed daemon was not reported down"
    if fault == "hang":
        # Its late batches are asked of the others after 0.1 s, and it is
        # dropped once silent for failover_after; never a stall of seconds.
        assert longest < 1.5, f"the caller waited {longest:.2f} s for a batch"
        assert any("silent for" in m for m in down), down
        victim.proc.send_signal(signal.SIGCONT)
    ds.close()
    for d in pool3:
        if d.proc.poll() is None:
            d.wait_metrics(loaderd_streams=0, loaderd_batches_in_flight=0)


def test_pool_refuses_daemons_with_other_data(binary, tmp_path):
    a, b = start_daemons(binary, tmp_path, [SPEC, "train=synthetic:1200?seed=4"])
    try:
        ds = loaderd.Dataset(f"{a.address},{b.address}", "train", 8)
        with pytest.raises(loaderd.Error, match="do not serve the same dataset") as e:
            next(iter(ds))
        assert a.address in str(e.value) and b.address in str(e.value), e.value
        assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
        ds.close()
        for d in (a, b):
            d.wait_metrics(loaderd_streams=0)
    finally:
        stop_all([a, b])


def _png_tar(path, n, bad):
    """n 8×8 PNGs as train/cK/NNNN.png, the one at bad cut short."""
    import io
    import tarfile
    with tarfile.open(path, "w") as t:
        for i in range(n):
            img = np.zeros((8, 8, 3), dtype=np.uint8)
            img[0, 0, 0] = i
            buf = io.BytesIO()
            Image.fromarray(img).save(buf, format="PNG")
            data = buf.getvalue()
            if i == bad:
                data = data[:len(data) // 2]
            info = tarfile.TarInfo(f"train/c{i % 2}/{i:04d}.png")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def test_pool_ends_at_a_sample_no_daemon_can_read(binary, tmp_path):
    data = tmp_path / "bad.tar"
    _png_tar(data, 64, 37)
    ds = start_daemons(binary, tmp_path, [f"train=tar:{data}"] * 2)
    try:
        for addr in (ds[0].address, target(ds)):
            # Classes sort: c0's 32 members, then c1's, of which 0037.png is
            # the 19th: index 50, in batch 6 of 8.
            got, err = [], None
            d = loaderd.Dataset(addr, "train", 8, shuffle=False, epochs=1, transport="inline")
            try:
                collect(d, at=lambda n, it: got.append(n), deadline=30)
            except loaderd.Error as e:
                err = e
            d.close()
            assert len(got) == 6 and err is not None and err.code == grpc.StatusCode.DATA_LOSS, (addr, got, err)
            assert "0037.png" in str(err), err
    finally:
        stop_all(ds)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("poolcerts")
    _ca(d, "ca")
    _issue(d, "server", "ca", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth")
    _issue(d, "client", "ca", "extendedKeyUsage=clientAuth")
    (d / "tokens").write_text("pool-test-token-0001 datasets=train\n")
    return d


def test_pool_over_tls_with_values_on_the_client(binary, tmp_path, certs):
    """Two daemons serving TLS with client certificates and a token: each
    gets the credentials; uint8 on the wire and normalize_on="cpu" give the
    daemon's f32 tensors bit for bit."""
    args = ["--tls-cert", certs / "server.crt", "--tls-key", certs / "server.key", "--tls-client-ca",
            certs / "ca.crt", "--auth-tokens", certs / "tokens"]
    ds = start_daemons(binary, tmp_path, [SPEC] * 2, args)
    tls = dict(tls_ca=certs / "ca.crt", tls_cert=certs / "client.crt", tls_key=certs / "client.key",
               token="pool-test-token-0001")
    kw = dict(augment="crop=32:4,flip=0.5,normalize=cifar10", dtype="f32", seed=5, epochs=1)
    try:
        ref = loaderd.Dataset(ds[0].address, "train", 50, **kw)  # the daemon normalises; shared memory
        pool = loaderd.Dataset(",".join(d.tcp for d in ds), "train", 50, normalize_on="cpu", **tls, **kw)
        assert pool.transport == "inline"
        n = 0
        it = pool.batches()
        for a, b in zip(ref.batches(), it):
            if n == 0:
                h = it._session.header
                assert h.dtype == pb.DTYPE_U8 and len(h.value_table) == 3 * 256 * 4
            assert b.images.dtype == torch.float32 and (b.epoch, b.index) == (a.epoch, a.index)
            assert torch.equal(b.images.contiguous().view(torch.uint8), a.images.contiguous().view(torch.uint8))
            assert torch.equal(b.indices, a.indices) and torch.equal(b.labels, a.labels)
            n += 1
        assert n == len(ref) == 24
        assert loaderd.sample_names(pool.address, "train", 0, 3, **tls) == ["0", "1", "2"]
        ref.close()
        pool.close()
        with pytest.raises(loaderd.Error) as e:
            next(iter(loaderd.Dataset(",".join(d.tcp for d in ds), "train", 50, **dict(tls, token="wrong-token"))))
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED, e.value
    finally:
        stop_all(ds)


def test_pool_waits_while_every_daemon_is_down(pool3, caplog):
    caplog.set_level(logging.WARNING, logger="loaderd.pool")
    two = pool3[:2]
    want = reference(two[0])
    ds = loaderd.Dataset(target(two), "train", 8, reconnect_wait=30, **KW)
    ds.load_state_dict(START)
    it = ds.batches(None)
    got = [digest(next(it)) for _ in range(5)]
    for d in two:
        d.proc.kill()
        d.proc.wait()
    time.sleep(0.5)
    two[1].start()  # here: a daemon dies with the thread that started it
    got += [digest(b) for b in it]
    assert got == want
    said = [r.getMessage() for r in caplog.records if "every daemon" in r.getMessage()]
    assert said and all(d.address in said[0] for d in two), said
    ds.close()


def test_pool_gives_up_when_no_daemon_comes_back(pool3):
    two = pool3[:2]
    ds = loaderd.Dataset(target(two), "train", 8, reconnect_wait=1, seed=1)
    it = iter(ds)
    next(it)
    for d in two:
        d.proc.kill()
    t0 = time.monotonic()
    with pytest.raises(loaderd.Error) as e:
        for _ in it:
            pass
    assert time.monotonic() - t0 < 15
    msg = str(e.value)
    assert "every daemon of pool" in msg and "reconnect_wait" in msg and all(d.address in msg for d in two), msg
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    ds.close()


def test_pool_of_a_dns_name_takes_daemons_added_to_it(binary, tmp_path, monkeypatch):
    """dns:///NAME:PORT is every address NAME resolves to, looked up again:
    a daemon added to the name takes work."""
    port = free_port()
    ds = []
    for i, ip in enumerate(("127.0.0.1", "127.0.0.2")):
        (tmp_path / f"d{i}").mkdir()
        d = Daemon(binary, tmp_path / f"d{i}", {"train": SPEC.partition("=")[2]})
        d.tcp = f"{ip}:{port}"
        ds.append(d)
    try:
        for d in ds:
            d.start()
        names = {"ips": ["127.0.0.1"]}
        real = _address.socket.getaddrinfo

        def getaddrinfo(host, *a, **kw):
            if host != "loaderd-pool.test":
                return real(host, *a, **kw)
            return [(_address.socket.AF_INET, _address.socket.SOCK_STREAM, 6, "", (ip, port)) for ip in names["ips"]]

        monkeypatch.setattr(_address.socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(_poolsched, "RESOLVE_EVERY", 0.2)
        pool = loaderd.Dataset(f"dns:///loaderd-pool.test:{port}", "train", 8, seed=2, epochs=None)
        assert loaderd.list_datasets(pool.address)[0].name == "train"
        it = pool.batches(None)
        deadline = time.monotonic() + 20
        for n, b in enumerate(it):
            s = it._session
            if n == 5:
                names["ips"] = ["127.0.0.1", "127.0.0.2"]
            if n > 5 and len(s.members()) == 2 and s.members()[1]["made"] > 0:
                break
            assert time.monotonic() < deadline, s.members()
        assert [m["address"] for m in s.members()] == [f"127.0.0.1:{port}", f"127.0.0.2:{port}"]
        pool.close()
    finally:
        stop_all(ds)


@pytest.mark.parametrize("text,members", [
    ("127.0.0.1:1,127.0.0.1:2", ["127.0.0.1:1", "127.0.0.1:2"]),
    ("unix:///a.sock, unix:///b.sock,unix:///a.sock", ["unix:/a.sock", "unix:/b.sock"]),
    ("node1:50051,[::1]:50051", ["node1:50051", "[::1]:50051"]),
])
def test_pool_addresses(text, members):
    p = _address.parse_target(text)
    assert [m.target for m in p.members] == members and p.host is None
    assert _address.parse_target("dns:///loaderd-pool.ml.svc:50051")[2:] == ("loaderd-pool.ml.svc", "50051")


@pytest.mark.parametrize("text,says", [
    ("node1:50051,,node2:50051", "an empty entry"),
    ("node1:50051,", "an empty entry"),
    ("node1:50051,node2", "'node2' has no port"),
    ("node1:50051,http://node2:50051", "is a URL"),
    ("node1:50051,dns:///pool:50051", "a name to resolve"),
    ("dns:///pool", "want dns:///NAME:PORT"),
    ("dns:///pool:http", "not a number"),
])
def test_pool_addresses_refused_with_the_reason(text, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(".", r"\.")):
        _address.parse_target(text)
    with pytest.raises(ValueError):
        loaderd.Dataset(text, "train", 8)


def test_pool_refuses_shared_memory_and_one_daemon_calls():
    with pytest.raises(ValueError, match="shared memory needs one daemon on this host"):
        loaderd.Dataset("127.0.0.1:1,127.0.0.1:2", "train", 8, transport="shm")
    with pytest.raises(ValueError, match="names several daemons"):
        loaderd.channel("127.0.0.1:1,127.0.0.1:2")


def test_pool_unary_calls_take_the_first_daemon_that_answers(pool3, tmp_path):
    addr = f"unix://{tmp_path}/nobody.sock,{pool3[1].address}"
    assert [i.name for i in loaderd.list_datasets(addr, connect_timeout=0)] == ["train"]
    assert loaderd.sample_names(addr, "train", 0, 2) == ["0", "1"]
    with pytest.raises(loaderd.UnreachableError, match="no daemon of pool .* answered") as e:
        loaderd.list_datasets(f"unix://{tmp_path}/a.sock,unix://{tmp_path}/b.sock", connect_timeout=0)
    assert "a.sock" in str(e.value) and "b.sock" in str(e.value)
