"""loaderd.serve: a daemon for the length of a script, a notebook or a with
block, on a private Unix socket."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Iterable, Mapping, Optional, Sequence, Set, Union

import grpc

from . import _fork, _rpc
from ._errors import Error

_running: Set["Daemon"] = set()  # started and not stopped: stopped at exit (see dataset._close_all)


def after_fork() -> None:
    """In a forked child: the parent's daemons stay the parent's (the
    child's exit must not stop them, nor remove their directories)."""
    _running.clear()

# Quick retries while the daemon comes up: gRPC's default reconnect backoff
# starts at 1 s and grows, which would make a 100 ms start look like seconds.
_FAST_RETRY = [("grpc.initial_reconnect_backoff_ms", 50), ("grpc.min_reconnect_backoff_ms", 50),
               ("grpc.max_reconnect_backoff_ms", 250)]


# The daemon a wheel carries (scripts/wheel.sh puts it here); a source
# install has none.
BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "loaderd")

PathLike = Union[str, "os.PathLike[str]"]


def bundled_binary() -> Optional[str]:
    """The daemon inside this package (a wheel built by scripts/wheel.sh),
    or None (a source install)."""
    if os.path.isfile(BUNDLED) and os.access(BUNDLED, os.X_OK):
        return BUNDLED
    return None


def find_binary(binary: Optional[PathLike] = None) -> str:
    """The loaderd executable, the first of: binary if given, $LOADERD_BIN,
    the daemon bundled in this package (a wheel), `loaderd` on PATH. The
    explicit ones win: a binary= or $LOADERD_BIN that is not an executable
    is an error, not skipped."""
    for what, cand in (("binary=", binary), ("$LOADERD_BIN", os.environ.get("LOADERD_BIN"))):
        if cand:
            path = shutil.which(os.fspath(cand)) or os.fspath(cand)
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise Error(f"loaderd: {what} {cand!r} is not an executable file")
            return os.path.abspath(path)
    found = bundled_binary() or shutil.which("loaderd")
    if found is None:
        raise Error("loaderd: no loaderd binary on PATH, and none bundled with this package (a source install): "
                    "install the wheel with the daemon inside (scripts/wheel.sh builds it), or build the daemon "
                    "(`go build -o bin/ ./cmd/loaderd` in the loaderd repository) and put bin/ on PATH, set "
                    "LOADERD_BIN, or pass binary=")
    return found


Datasets = Union[str, Mapping[str, str], Iterable[PathLike]]


def _dataset_args(datasets: Datasets) -> list[str]:
    if isinstance(datasets, str):
        datasets = [datasets]
    if isinstance(datasets, dict):
        items = [f"{name}={spec}" for name, spec in datasets.items()]
    else:
        items = [os.fspath(d) for d in datasets]
    for it in items:
        name, sep, spec = it.partition("=")
        if not sep or not name or not spec:
            raise ValueError(f"loaderd: dataset {it!r}: want NAME=FORMAT:PATH, or a dict {{name: 'FORMAT:PATH'}}")
    if not items:
        raise ValueError("loaderd: serve() needs at least one dataset")
    args = []
    for it in items:
        args += ["--dataset", it]
    return args


class Daemon:
    """A `loaderd serve` process started by serve(). address is what
    loaderd.Dataset takes; stop() (or leaving the with block, or the
    interpreter's exit) ends it: SIGTERM, then SIGKILL after stop_timeout."""

    def __init__(self, proc: subprocess.Popen[bytes], socket: str, workdir: str, log: str, owns_workdir: bool,
                 stop_timeout: float) -> None:
        self.proc = proc
        self.socket = socket
        self.address = "unix://" + socket
        self.workdir = workdir
        self.log = log
        self._owns = owns_workdir
        self.stop_timeout = stop_timeout
        self.returncode: Optional[int] = None
        self._owner = os.getpid()  # a forked child neither waits for nor stops its parent's daemon

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        if os.getpid() != self._owner:
            try:
                os.kill(self.proc.pid, 0)
                return True
            except OSError:
                return False
        return self.proc.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the daemon's log."""
        try:
            with open(self.log, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 16384))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: Optional[float] = None) -> Optional[int]:
        """Stop the daemon (SIGTERM: streams end with UNAVAILABLE; SIGKILL
        after timeout seconds) and remove its private directory. Returns its
        exit code; idempotent. In a process forked from the one that
        started it, it does nothing (the daemon is the parent's)."""
        if self.returncode is None and os.getpid() == self._owner:
            timeout = self.stop_timeout if timeout is None else timeout
            if self.proc.poll() is None:
                # This process's own streams and channels end first: the
                # daemon's graceful stop would wait 5 s for their connections.
                from .dataset import _daemon_stopping  # (dataset imports this module)
                _daemon_stopping(os.path.abspath(self.socket), Error(
                    f"loaderd: the daemon at {self.address} was stopped (Daemon.stop()) while this stream was open; "
                    "start a new iterator on a running daemon", grpc.StatusCode.CANCELLED))
                try:
                    self.proc.send_signal(signal.SIGTERM)
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.returncode = self.proc.returncode
            _running.discard(self)
            if self._owns:
                shutil.rmtree(self.workdir, ignore_errors=True)
        return self.returncode

    def __enter__(self) -> Daemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.returncode is None and self.alive() else f"exited {self.proc.returncode}"
        return f"<loaderd.Daemon pid {self.pid} at {self.address}, {state}>"


def serve(datasets: Datasets, *, binary: Optional[PathLike] = None, workers: Union[int, str, None] = None,
          args: Sequence[PathLike] = (), socket: Optional[PathLike] = None, log: Optional[PathLike] = None,
          ready_timeout: float = 120.0, stop_timeout: float = 15.0) -> Daemon:
    """Start `loaderd serve` on a private Unix socket and wait until it is
    healthy (gRPC health: SERVING); returns a Daemon, also a context
    manager:

        with loaderd.serve({"cifar10": "cifar:/data/cifar-10-batches-bin"}) as d:
            ds = loaderd.Dataset(d.address, "cifar10", 256)

    datasets: {name: "FORMAT:PATH"} or a list of "NAME=FORMAT:PATH".
    binary: the executable (default: $LOADERD_BIN, else the daemon bundled
        in this package's wheel, else `loaderd` on PATH; find_binary()).
    workers: the daemon's worker goroutines (default: its own, GOMAXPROCS),
        or "auto": as many as keep the trainers from waiting (docs/OPERATIONS.md).
    args: more `loaderd serve` flags, e.g. ["--memory-limit", "2GiB"].
    socket: the socket's path (default a fresh private directory, removed
        at stop); one fixed per node lets other processes find it.
    log: file for the daemon's output (default loaderd.log in the private
        directory).
    The daemon is stopped at stop(), at the end of the with block, or when
    the interpreter exits; started from the main thread, it also gets
    SIGTERM if this process dies without stopping it (setpriv --pdeathsig).
    """
    _fork.check()
    exe = find_binary(binary)
    argv = [exe, "serve"] + _dataset_args(datasets)
    if workers is not None:
        argv += ["--workers", "auto" if workers == "auto" else str(int(workers))]
    argv += [os.fspath(a) for a in args]
    owns = socket is None
    if socket is None:
        workdir = tempfile.mkdtemp(prefix="loaderd-")
        socket = os.path.join(workdir, "loaderd.sock")
    else:
        socket = os.path.abspath(os.fspath(socket))
        workdir = os.path.dirname(socket)
        os.makedirs(workdir, exist_ok=True)
    if len(socket.encode()) > 100:
        raise ValueError(f"loaderd: socket path {socket!r} is over the 100 bytes a Unix socket may have")
    argv += ["--unix", socket]
    log = os.path.abspath(os.fspath(log)) if log else os.path.join(workdir, "loaderd.log")
    setpriv = shutil.which("setpriv")
    if setpriv and threading.current_thread() is threading.main_thread():
        # PR_SET_PDEATHSIG fires when the thread that forked ends, so only
        # from the main thread: its end is the process's.
        argv = [setpriv, "--pdeathsig", "TERM", "--"] + argv
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=False, close_fds=True)
    d = Daemon(proc, socket, workdir, log, owns, stop_timeout)
    _running.add(d)
    try:
        _wait_healthy(d, ready_timeout)
    except BaseException:
        d.stop(timeout=5)
        raise
    return d


def _wait_healthy(d: Daemon, timeout: float) -> None:
    t0 = time.monotonic()
    deadline = t0 + timeout
    last = "no socket yet"
    with grpc.insecure_channel("unix:" + d.socket, options=_FAST_RETRY) as ch:
        while True:
            if d.proc.poll() is not None:
                d.returncode = d.proc.returncode
                raise Error(f"loaderd: the daemon exited with status {d.proc.returncode} before it was ready; "
                            f"its log ({d.log}):\n{d.log_tail()}")
            if os.path.exists(d.socket):
                try:
                    st = _rpc.health(ch, timeout=min(1.0, max(0.05, deadline - time.monotonic())),
                                     wait_for_ready=True)
                    if st == "SERVING":
                        return
                    last = f"health {st}"
                except grpc.RpcError as e:
                    last = f"{e.code().name}: {e.details()}"
            if time.monotonic() > deadline:
                raise Error(f"loaderd: the daemon (pid {d.pid}) was not healthy within {timeout:g} s "
                            f"(last: {last}); its log ({d.log}):\n{d.log_tail()}")
            time.sleep(0.02)


def stop_all() -> None:
    for d in list(_running):
        try:
            d.stop()
        except Exception:
            pass
