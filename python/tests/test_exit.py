"""Processes using loaderd exit with status 0, in every pattern a training
script has, many times over.

The failure this guards against is timing-dependent: gRPC's request thread
used to hold the stream's session, and freed torch tensors while the
interpreter was shutting down; torch then called pthread_exit inside a C++
destructor and the process aborted (SIGABRT, exit code 134, "terminate
called without an active exception") in a fraction of runs, after training
had finished. One run proves nothing, so each pattern runs RUNS times
(LOADERD_EXIT_RUNS, default 20) as its own process.

Single-process patterns run as children forked from a zygote that has
imported torch and loaderd (exit_patterns.py), so the 200 runs cost what
the patterns do, not 200 imports of torch; each child ends through the
interpreter's whole shutdown like a script. LOADERD_EXIT_SPAWN=1 runs each
in a fresh interpreter instead (slower). DDP runs under the real torchrun.
"""

import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

import exit_patterns
from conftest import free_port

HERE = pathlib.Path(__file__).resolve().parent
RUNS = int(os.environ.get("LOADERD_EXIT_RUNS", "20"))
DATASET = "exit"  # conftest.DATASETS: 640 synthetic samples, 5 batches of 128


def _summary(results):
    return ", ".join(f"{p}: {sum(c == 0 for c in codes)}/{len(codes)} exit 0" + (
        f" (others: {sorted(c for c in codes if c != 0)})" if any(codes) else "") for p, codes in results.items())


def _spawn(pattern, address, logdir, k):
    with open(logdir / f"{k:04d}-{pattern}.log", "wb") as log:
        return subprocess.run([sys.executable, str(HERE / "exit_patterns.py"), pattern, address, DATASET],
                              stdout=log, stderr=subprocess.STDOUT, timeout=120).returncode


def test_every_pattern_exits_0_every_time(daemon, tmp_path):
    t0 = time.monotonic()
    if os.environ.get("LOADERD_EXIT_SPAWN") == "1":
        jobs = [(p, k) for p in exit_patterns.PATTERNS for k in range(RUNS)]
        results = {p: [] for p in exit_patterns.PATTERNS}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for (p, _), rc in zip(jobs, pool.map(lambda j: _spawn(j[0], daemon.address, tmp_path, j[1]), jobs)):
                results[p].append(rc)
    else:
        env = dict(os.environ, EXIT_TEST_LOGS=str(tmp_path), EXIT_TEST_PARALLEL="4")
        jobs = "".join(f"{p} {RUNS}\n" for p in exit_patterns.PATTERNS)
        out = subprocess.run([sys.executable, str(HERE / "exit_patterns.py"), "--zygote", daemon.address, DATASET],
                             input=jobs, capture_output=True, text=True, env=env, timeout=900)
        assert out.returncode == 0, f"zygote failed ({out.returncode}): {out.stderr[-3000:]}"
        results = json.loads(out.stdout.strip().splitlines()[-1])["results"]
    summary = _summary(results)
    print(f"\nexit codes in {time.monotonic() - t0:.0f} s: {summary}")
    bad = sorted(tmp_path.glob("*.log"))
    failed = {p: c for p, c in results.items() if any(c) or len(c) != RUNS}
    if failed:
        logs = "".join(f"\n--- {f.name}\n{f.read_text(errors='replace')[-1500:]}" for f in bad
                       if any(f.name.endswith(f"-{p}.log") for p in failed))[:8000]
        pytest.fail(f"not every run exited 0: {summary}{logs}")


def test_torchrun_ddp_exits_0_every_time(daemon, tmp_path):
    """DDP (gloo, 2 processes) under torchrun, RUNS times, two launches at
    a time. Debian's torchrun (torch 1.13 on Python 3.11) needs
    --redirects 1 --tee 1: its default --redirects 0 parses to None there
    (Python 3.11's IntFlag no longer iterates the zero member Std.NONE),
    and the launcher dies with AttributeError: 'NoneType' object has no
    attribute 'get'."""
    t0 = time.monotonic()

    def launch(k):
        log = tmp_path / f"ddp-{k:02d}"
        # Not --standalone: its rendezvous store is always localhost:29400,
        # and two launches at once would share (and break) one store.
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}",
               # The agent looks at its workers every 5 s by default: half of each launch.
               "--monitor_interval", "0.2",
               "--redirects", "1", "--tee", "1", "--log_dir", str(log / "torchrun"),
               str(HERE / "exit_patterns.py"), exit_patterns.DDP, daemon.address, DATASET]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        log.mkdir()
        with open(log / "out.log", "wb") as out:
            return subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=300).returncode

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        codes = list(pool.map(launch, range(RUNS)))
    print(f"\ntorchrun ddp exit codes in {time.monotonic() - t0:.0f} s: {sum(c == 0 for c in codes)}/{len(codes)} exit 0")
    if any(codes):
        first = next(k for k, c in enumerate(codes) if c)
        text = (tmp_path / f"ddp-{first:02d}" / "out.log").read_text(errors="replace")[-4000:]
        pytest.fail(f"torchrun exit codes {codes}; run {first}:\n{text}")
