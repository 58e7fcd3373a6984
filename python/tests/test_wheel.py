"""The wheel with the daemon inside (scripts/wheel.sh), as a user gets it:
built into a temporary directory, installed into a fresh virtual
environment with pip (--no-index: nothing but the wheel), then the bundled
daemon is started by loaderd.serve() and by the `loaderd` command, with no
Go, no checkout and no $LOADERD_BIN in sight, and a batch of a synthetic
dataset is read through the client.

$LOADERD_WHEEL names a wheel already built (for this machine's CPU) to test
instead of building one; without it the test needs Go (skipped otherwise)."""

import os
import pathlib
import platform
import shutil
import signal
import subprocess
import sys
import textwrap
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine())
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def _go():
    return shutil.which("go") or shutil.which("go", path="/usr/local/go/bin")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    if os.environ.get("LOADERD_WHEEL"):
        return pathlib.Path(os.environ["LOADERD_WHEEL"])
    if GOARCH is None:
        pytest.skip(f"no loaderd wheel for {platform.machine()}")
    go = _go()
    if go is None:
        pytest.skip("Go is not installed (scripts/wheel.sh builds the daemon into the wheel); "
                    "or set LOADERD_WHEEL to a built wheel")
    out = tmp_path_factory.mktemp("dist")
    env = dict(os.environ, WHEEL_ARCHES=GOARCH, PYTHON=PYTHON,
               PATH=os.environ.get("PATH", "") + ":" + os.path.dirname(go))
    r = subprocess.run([str(ROOT / "scripts" / "wheel.sh"), str(out)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    # No cgo deprecation warnings (nor any other) in the build's output: one line per wheel.
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
    assert [line.split()[0] for line in r.stdout.splitlines()] == ["wheel:"], r.stdout
    (whl,) = out.glob("*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh virtual environment (seeing the system's torch, grpcio,
    numpy and protobuf) with only the wheel pip-installed into it."""
    d = tmp_path_factory.mktemp("venv")
    subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", str(d)], check=True, timeout=120)
    r = subprocess.run([str(d / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return d


def _env(venv):
    """The environment of a user of the wheel: no $LOADERD_BIN, no Go, no
    loaderd on PATH but the venv's own command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOADERD_", "PYTHON"))}
    env["PATH"] = f"{venv}/bin:/usr/bin:/bin"
    return env


def test_the_wheel_carries_the_daemon_types_and_command(wheel):
    name, version, py, abi, plat = wheel.name[:-len(".whl")].split("-")
    arch = {"amd64": "x86_64", "arm64": "aarch64"}[GOARCH]
    assert (name, py, abi) == ("loaderd", "py3", "none")
    assert plat == f"manylinux_2_17_{arch}.manylinux2014_{arch}", plat
    with zipfile.ZipFile(wheel) as z:
        infos = {i.filename: i for i in z.infolist()}
        daemon = infos["loaderd/bin/loaderd"]
        assert (daemon.external_attr >> 16) & 0o111 == 0o111, oct(daemon.external_attr >> 16)
        assert z.open(daemon).read(4) == b"\x7fELF"
        for f in ("loaderd/py.typed", "loaderd/__init__.py", "loaderd/dataset.py", "loaderd/serve.py",
                  "loaderd/cifar.py", "loaderd/v1/loader_pb2.py", "loaderd/v1/loader_pb2.pyi",
                  "loaderd/v1/loader_pb2_grpc.py", "_loaderd_cli.py"):
            assert f in infos, f
        dist = f"loaderd-{version}.dist-info"
        meta = z.read(f"{dist}/WHEEL").decode()
        assert "Root-Is-Purelib: false" in meta
        assert f"Tag: py3-none-manylinux_2_17_{arch}" in meta and f"Tag: py3-none-manylinux2014_{arch}" in meta
        assert "loaderd = _loaderd_cli:main" in z.read(f"{dist}/entry_points.txt").decode()
        # Nothing from the checkout beyond the package: no tests, examples or build leftovers.
        assert not [f for f in infos if f.split("/")[0] not in ("loaderd", dist, "_loaderd_cli.py")], list(infos)
        assert f"Version: {version}" in z.read(f"{dist}/METADATA").decode()


def test_serve_runs_the_bundled_daemon(venv, tmp_path):
    """loaderd.serve() with nothing configured starts the daemon inside the
    installed package; an explicit $LOADERD_BIN still wins."""
    script = textwrap.dedent("""
        import os, pathlib, sys
        import loaderd
        here = pathlib.Path(loaderd.__file__).resolve().parent
        assert pathlib.Path(sys.prefix).resolve() in here.parents, (here, sys.prefix)  # the installed one
        exe = loaderd.find_binary()
        assert exe == str(here / "bin" / "loaderd"), exe
        with loaderd.serve({"s": "synthetic:1000"}, workers=1) as d:
            with loaderd.Dataset(d.address, "s", 64, connect_timeout=30) as ds:
                images, labels = next(iter(ds))
                assert tuple(images.shape) == (64, 3, 32, 32) and str(images.dtype) == "torch.float32", images.shape
                assert labels.shape == (64,) and 0 <= int(labels.min()) <= int(labels.max()) < 10
        assert d.returncode == 0, d.returncode
        os.environ["LOADERD_BIN"] = "/bin/true"
        assert loaderd.find_binary() == "/bin/true"
        print("ok")
    """)
    r = subprocess.run([str(venv / "bin" / "python"), "-c", script], cwd=tmp_path, env=_env(venv),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split()[-1:] == ["ok"], r.stdout + r.stderr


def test_the_loaderd_command_is_the_bundled_daemon(venv, tmp_path):
    """`loaderd serve ...` from the shell: the command execs the bundled
    daemon (same process: signals reach it, its exit status is the
    command's) without importing the client first."""
    env = _env(venv)
    r = subprocess.run(["loaderd"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "usage: loaderd <command>" in r.stdout + r.stderr, r.stdout + r.stderr
    sock = tmp_path / "d.sock"
    log = open(tmp_path / "loaderd.log", "wb")
    proc = subprocess.Popen(["loaderd", "serve", "--dataset", "s=synthetic:256", "--unix", str(sock),
                             "--workers", "1", "--log-level", "warn"], env=env, stdout=log, stderr=log,
                            cwd=tmp_path)
    try:
        script = textwrap.dedent(f"""
            import loaderd
            ds = loaderd.Dataset("unix://{sock}", "s", 32, connect_timeout=30)
            images, labels = next(iter(ds))
            assert tuple(images.shape) == (32, 3, 32, 32), images.shape
            ds.close()
            print("ok")
        """)
        r = subprocess.run([str(venv / "bin" / "python"), "-c", script], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.split()[-1:] == ["ok"], r.stdout + r.stderr
        exe = pathlib.Path(f"/proc/{proc.pid}/exe").resolve()
        assert exe.name == "loaderd" and exe.parent.name == "bin" and exe.parent.parent.name == "loaderd", exe
        assert pathlib.Path(venv).resolve() in exe.parents, exe
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
