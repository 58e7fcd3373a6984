"""A real loaderd for the tests: built from this checkout, serving CIFAR-10
binary files the fixture writes, so every dataset index's pixels and label
are known."""

import ctypes
import os
import pathlib
import re
import signal
import socket
import subprocess
import time
import urllib.request

import numpy as np
import pytest

# The tests import the installed package (scripts/python-test.sh installs
# it into a virtual environment and runs pytest outside the source tree);
# ROOT is only where the daemon's Go sources are.
ROOT = pathlib.Path(__file__).resolve().parents[2]

import loaderd  # noqa: E402
from loaderd import cifar  # noqa: E402

N = 1000      # divisible by 4: world-4 ranks split it exactly
N_ODD = 1003  # not divisible: padding and drop_last show


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    # A killed pytest must not leave its daemon behind: PR_SET_PDEATHSIG.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


class Daemon:
    """One running `loaderd serve`; restart() brings it back on the same
    socket and ports."""

    def __init__(self, binary, workdir, datasets, args=()):
        self.binary, self.workdir, self.datasets = binary, workdir, datasets
        self.args = list(args)  # more `loaderd serve` flags
        self.sock = str(workdir / "loaderd.sock")
        self.address = "unix://" + self.sock
        self.port, self.metrics_port = free_port(), free_port()
        self.tcp = f"127.0.0.1:{self.port}"
        self.proc = None
        self.log = open(workdir / "loaderd.log", "ab")

    def start(self):
        args = [str(self.binary), "serve", "--listen", self.tcp, "--unix", self.sock,
                "--metrics-listen", f"127.0.0.1:{self.metrics_port}", "--workers", "2",
                "--log-level", "warn", "--shutdown-timeout", "3s"]
        for name, spec in self.datasets.items():
            args += ["--dataset", f"{name}={spec}"]
        args += self.args
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"loaderd exited with {self.proc.returncode}; see {self.log.name}")
            try:
                loaderd.list_datasets(self.address, connect_timeout=1)
                self.metrics()
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def metrics(self):
        """The daemon's unlabelled Prometheus gauges and counters by name."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        return {m[1]: float(m[2]) for m in re.finditer(r"^(loaderd_\w+) (\S+)$", text, re.M)}

    def wait_metrics(self, timeout=10, **want):
        """Poll until every named metric has the wanted value; return them."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.metrics()
            if all(got.get(k) == v for k, v in want.items()):
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"metrics {want} not reached in {timeout}s: {got}")
            time.sleep(0.05)


@pytest.fixture(scope="session")
def binary(tmp_path_factory):
    """The daemon: $LOADERD_BIN (scripts/python-test.sh builds it once), or
    built from this checkout."""
    if os.environ.get("LOADERD_BIN"):
        return pathlib.Path(os.environ["LOADERD_BIN"])
    out = tmp_path_factory.mktemp("bin") / "loaderd"
    env = dict(os.environ)
    env["PATH"] = env.get("PATH", "") + ":/usr/local/go/bin"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/loaderd"], cwd=ROOT, env=env, check=True)
    return out


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    """Random images and labels, written as CIFAR-10 binary files."""
    rng = np.random.default_rng(7)
    sets = {}
    for name, n in (("c10", N), ("odd", N_ODD)):
        images = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n)
        d = tmp_path_factory.mktemp(name)
        cifar.write_cifar10(d, images, labels, per_file=400)  # several files: indices run across them
        sets[name] = (d, images, labels)
    return sets


DATASETS = {
    "big": "synthetic:25000",  # more names than one SampleNames page
    "exit": "synthetic:640",   # test_exit.py: tiny epochs
}

@pytest.fixture(scope="session")
def daemon(binary, data, tmp_path_factory):
    datasets = {name: f"cifar:{path}" for name, (path, _, _) in data.items()}
    datasets.update(DATASETS)
    d = Daemon(binary, tmp_path_factory.mktemp("daemon"), datasets)
    d.start()
    yield d
    d.stop()


@pytest.fixture
def open_dataset(daemon):
    """Dataset factory bound to the daemon; closes what it made. The
    daemon's stream gauge must be back to 0 afterwards: a test that leaks a
    stream fails here."""
    made = []

    def make(name="c10", batch_size=64, **kw):
        kw.setdefault("seed", 3)
        ds = loaderd.Dataset(kw.pop("address", daemon.address), name, batch_size, **kw)
        made.append(ds)
        return ds

    yield make
    for ds in made:
        ds.close()
    daemon.wait_metrics(loaderd_streams=0, loaderd_slots_leased=0, loaderd_batches_in_flight=0)
