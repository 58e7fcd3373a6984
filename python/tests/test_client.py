"""Addresses, errors that say what to do, waiting for a daemon, sample
names, loaderd.serve, the command line, the package and its stubs."""

import ast
import os
import pathlib
import subprocess
import sys
import threading
import time

import grpc
import pytest

import loaderd
from conftest import N, ROOT, Daemon, free_port
from loaderd import _address

# -- addresses ------------------------------------------------------------------


@pytest.mark.parametrize("text,target,path", [
    ("127.0.0.1:50051", "127.0.0.1:50051", None),
    ("node-3.cluster:50051", "node-3.cluster:50051", None),
    ("[::1]:50051", "[::1]:50051", None),
    ("unix:///run/loaderd.sock", "unix:/run/loaderd.sock", "/run/loaderd.sock"),
    ("unix:/run/loaderd.sock", "unix:/run/loaderd.sock", "/run/loaderd.sock"),
    ("/run/loaderd.sock", "unix:/run/loaderd.sock", "/run/loaderd.sock"),
    ("unix-abstract:loaderd", "unix-abstract:loaderd", None),
    ("dns:///node3:50051", "dns:///node3:50051", None),
])
def test_addresses_accepted(text, target, path):
    a = _address.parse(text)
    assert (a.target, a.unix_path) == (target, path)


def test_relative_unix_paths_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for text in ("unix:run/x.sock", "./run/x.sock"):
        assert _address.parse(text).unix_path == str(tmp_path / "run" / "x.sock")


@pytest.mark.parametrize("text,says", [
    ("localhost", "needs one, e.g. localhost:50051"),
    ("10.0.0.7", "has no port"),
    ("http://localhost:50051", "is a URL"),
    ("https://node3:50051", "give HOST:PORT"),
    ("grpc://node3:50051", "is a URL"),
    ("unix://run/loaderd.sock", "three slashes"),
    ("::1", "brackets"),
    ("[::1]", "has no port"),
    ("node3:0", "1..65535"),
    ("node3:http", "not a number"),
    (":50051", "has no host"),
    ("", "empty address"),
    ("ftp://x:1", "unknown scheme"),
])
def test_addresses_refused_with_the_reason(text, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(".", r"\.")):
        _address.parse(text)
    with pytest.raises(ValueError):  # at construction, not at the first batch
        loaderd.Dataset(text, "c10", 64)


# -- errors that say what to do --------------------------------------------------


def test_unreachable_unix_socket(tmp_path):
    sock = tmp_path / "nobody.sock"
    t0 = time.monotonic()
    with pytest.raises(loaderd.UnreachableError) as e:
        next(iter(loaderd.Dataset(f"unix://{sock}", "c10", 64, connect_timeout=0)))
    assert time.monotonic() - t0 < 5
    msg = str(e.value)
    assert f"cannot reach loaderd at unix://{sock}" in msg and "is `loaderd serve` running?" in msg
    assert f"no socket at {sock}" in msg and f"loaderd serve --unix {sock}" in msg
    assert "connect_timeout" in msg and e.value.code == grpc.StatusCode.UNAVAILABLE


def test_unreachable_tcp_names_how_long_it_waited():
    addr = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(loaderd.UnreachableError, match=rf"cannot reach loaderd at {addr} within 1\.5 s"):
        loaderd.list_datasets(addr, connect_timeout=1.5)
    assert 1.4 < time.monotonic() - t0 < 10


def test_unknown_dataset_lists_the_registered_ones(daemon):
    with pytest.raises(loaderd.Error, match=r"unknown dataset 'nope'.*registered: big, c10, exit, odd") as e:
        next(iter(loaderd.Dataset(daemon.address, "nope", 64)))
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_a_trainer_started_before_the_daemon_waits_for_it(binary, data, tmp_path):
    path, _, _ = data["c10"]
    d = Daemon(binary, tmp_path, {"c10": f"cifar:{path}"})
    got = {}

    def trainer():  # started first; the daemon comes 1.5 s later
        try:
            ds = loaderd.Dataset(d.address, "c10", 100, connect_timeout=60)
            t0 = time.monotonic()
            got["n"] = sum(len(lab) for _, lab in ds)
            got["waited"] = time.monotonic() - t0
            ds.close()
        except Exception as e:  # reported below
            got["error"] = e

    t = threading.Thread(target=trainer)
    t.start()
    try:
        time.sleep(1.5)
        d.start()  # from the main thread: the daemon dies with the thread that started it
        t.join(60)
        assert "error" not in got, got.get("error")
        assert got["n"] == N and got["waited"] > 1.0
    finally:
        t.join(60)
        d.stop()


def test_a_daemon_that_never_comes_back(binary, data, tmp_path):
    path, _, _ = data["c10"]
    d = Daemon(binary, tmp_path, {"c10": f"cifar:{path}"})
    d.start()
    try:
        ds = loaderd.Dataset(d.address, "c10", 50, reconnect_wait=1.5)
        it = iter(ds)
        next(it)
        d.stop()
        t0 = time.monotonic()
        with pytest.raises(loaderd.Error) as e:
            for _ in it:
                pass
        msg = str(e.value)
        assert "did not come back within 1.5 s" in msg and "last status: " in msg, msg
        assert "UNAVAILABLE" in msg or "DEADLINE_EXCEEDED" in msg, msg
        assert time.monotonic() - t0 < 15
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
    finally:
        d.stop()


# -- sample names ----------------------------------------------------------------


def test_sample_names_map_indices(open_dataset, daemon):
    ds = open_dataset("big", batch_size=500)
    b = next(iter(ds.batches()))
    names = ds.sample_names(b.indices)
    assert len(names) == 500 and all(isinstance(n, str) and n for n in names)
    assert names == [ds.sample_name(i) for i in b.indices.tolist()]
    # Pages of 10,000: a range across a page boundary, and the whole dataset.
    across = loaderd.sample_names(daemon.address, "big", 9995, 10)
    assert across == ds.sample_names(range(9995, 10005))
    everything = loaderd.sample_names(daemon.address, "big")
    assert len(everything) == 25000 and len(set(everything)) == 25000
    assert everything[19999] == ds.sample_name(19999)
    with pytest.raises(IndexError):
        ds.sample_name(25000)


def test_sample_names_of_a_source_without_names_are_indices(daemon):
    # The synthetic source has no files: each name is the decimal index.
    assert loaderd.sample_names(daemon.address, "exit", 630) == [str(i) for i in range(630, 640)]
    with pytest.raises(loaderd.Error) as e:
        loaderd.sample_names(daemon.address, "nope", 0, 1)
    assert e.value.code == grpc.StatusCode.NOT_FOUND


# -- loaderd.serve -----------------------------------------------------------------


def test_serve_starts_waits_and_stops(binary, data):
    path, _, _ = data["c10"]
    with loaderd.serve({"c10": f"cifar:{path}"}, binary=binary, workers=1) as d:
        assert d.alive() and os.path.exists(d.socket)
        assert [i.name for i in loaderd.list_datasets(d.address, connect_timeout=0)] == ["c10"]
        ds = loaderd.Dataset(d.address, "c10", 250)
        assert sum(len(lab) for _, lab in ds) == N
        ds.close()
    assert d.returncode == 0  # SIGTERM: a clean stop
    assert not os.path.exists(d.workdir)


@pytest.mark.parametrize("keep", ["iterator", "peek", "warm"])
def test_stop_is_prompt_with_a_live_stream(binary, data, keep):
    """PYTORCH.md's notebook: d.stop() with an iterator still alive (kept,
    or dropped after next(iter(ds)), or a finished epoch's parked stream)
    returns at once, not after gRPC's 5 s wait for the connection; the
    kept iterator's next use says the daemon was stopped."""
    path, _, _ = data["c10"]
    d = loaderd.serve({"c10": f"cifar:{path}"}, binary=binary, workers=1)
    ds = loaderd.Dataset(d.address, "c10", 250)
    it = iter(ds)
    if keep == "iterator":
        next(it)
    elif keep == "peek":
        images, labels = next(iter(ds))
        del it
    else:
        assert sum(len(lab) for _, lab in it) == N  # the next epoch's stream stays open
    t0 = time.monotonic()
    assert d.stop() == 0
    assert time.monotonic() - t0 < 0.5
    if keep == "iterator":
        with pytest.raises(loaderd.Error, match=r"was stopped \(Daemon.stop\(\)\) while this stream was open"):
            next(it)
    ds.close()


def test_serve_finds_the_binary_and_reports_a_failed_start(binary, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("LOADERD_BIN", raising=False)
    with pytest.raises(loaderd.Error, match="no loaderd binary on PATH"):
        loaderd.serve({"x": "synthetic"})
    monkeypatch.setenv("LOADERD_BIN", str(binary))
    assert loaderd.find_binary() == str(binary)
    t0 = time.monotonic()
    with pytest.raises(loaderd.Error, match=r"exited with status \d+ before it was ready(.|\n)*nope"):
        loaderd.serve({"x": "nope:/nothing"})
    assert time.monotonic() - t0 < 30
    with pytest.raises(ValueError, match="NAME=FORMAT:PATH"):
        loaderd.serve(["just-a-name"])


# -- the command line ---------------------------------------------------------------


def test_python_m_loaderd(daemon):
    out = subprocess.run([sys.executable, "-m", "loaderd", "datasets", daemon.address],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAME", "FORMAT", "SAMPLES"]
    assert any(line.split()[:3] == ["c10", "cifar", "1,000"] for line in lines)
    out = subprocess.run([sys.executable, "-m", "loaderd", "names", daemon.address, "exit", "5", "2"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == ["5\t5", "6\t6"]
    out = subprocess.run([sys.executable, "-m", "loaderd", "datasets", "localhost"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "needs one" in out.stderr


# -- the package and its stubs --------------------------------------------------------


def test_the_installed_package_is_the_one_under_test():
    """scripts/python-test.sh sets LOADERD_TEST_INSTALLED: the tests must
    run against what pip installed, not the source tree."""
    if not os.environ.get("LOADERD_TEST_INSTALLED"):
        pytest.skip("run from the source tree (scripts/python-test.sh tests the installed package)")
    here = pathlib.Path(loaderd.__file__).resolve()
    assert ROOT not in here.parents, here
    assert pathlib.Path(sys.prefix).resolve() in here.parents, (here, sys.prefix)


def test_stubs_are_the_builder_style_that_protobuf_4_to_6_import():
    """loader_pb2.py must build its descriptors from the serialized file
    with google.protobuf.internal.builder (protoc >= 3.20), not one by one
    with _descriptor.FieldDescriptor(...) as protoc 3.5 did: protobuf 4.21+
    runtimes refuse that ("Descriptors cannot be created directly")."""
    import loaderd.v1.loader_pb2 as m
    tree = ast.parse(pathlib.Path(m.__file__).read_text())
    imported = {a.name if isinstance(n, ast.Import) else f"{n.module}.{a.name}"
                for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    assert imported == {"google.protobuf.internal.builder", "google.protobuf.descriptor",
                        "google.protobuf.descriptor_pool", "google.protobuf.symbol_database"}
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "_builder.BuildTopDescriptorsAndMessages" in calls
    assert not any(c.startswith(("_descriptor.", "_reflection.")) for c in calls), calls


@pytest.mark.parametrize("impl", ["python", "cpp"])
def test_stubs_import_under_each_protobuf_implementation(impl):
    code = ("import loaderd.v1.loader_pb2 as pb, loaderd.v1.loader_pb2_grpc as g;"
            "from google.protobuf.internal import api_implementation as a;"
            "r = pb.SampleNamesRequest(dataset='x', start=3, count=2);"
            "assert pb.SampleNamesRequest.FromString(r.SerializeToString()) == r;"
            "h = pb.ShmRegion(fd_socket='s.fd', token=b'k' * 32);"
            "assert pb.ShmRegion.FromString(h.SerializeToString()).token == b'k' * 32;"
            "print(a.Type())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=impl))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == impl
