"""Training-script patterns whose process must exit with status 0, for
test_exit.py. Each pattern is what a user writes; the process then ends the
ordinary way (end of the script, Py_FinalizeEx), which is where an abort
(SIGABRT, "terminate called without an active exception") would show.

    python exit_patterns.py PATTERN ADDRESS DATASET       one run, a fresh interpreter
    python exit_patterns.py --zygote ADDRESS DATASET      many runs: reads "PATTERN COUNT" lines,
                                                          forks one child per run, prints a JSON summary

The zygote imports torch and loaderd once and forks a child per run: the
child runs the pattern and leaves by SystemExit through the whole
interpreter shutdown (atexit, thread shutdown, finalisation), exactly as a
script does, without paying the 1.3 s import of torch each time. The
zygote itself opens no channel and starts no thread before forking.
"""

import json
import os
import signal
import sys
import time

import torch

import loaderd

DDP = "ddp"  # run under torchrun by test_exit.py, not by the zygote


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 10))


def _step(model, opt, images, labels):
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


KEEP = []  # what a script keeps in globals until the end: tensors, tracebacks


def pattern(name, address, dataset):
    transport = "inline" if name.startswith("inline") else "shm"
    kind = name.split("-", 1)[1]
    ds = loaderd.Dataset(address, dataset, 128, seed=1, transport=transport, connect_timeout=30)
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if kind in ("loop", "loop-close"):
        for images, labels in ds:  # a whole (small) epoch, training
            _step(model, opt, images, labels)
        KEEP.append(images)  # the last batch, kept to the end
        if kind == "loop-close":
            ds.close()
    elif kind == "break":
        for k, (images, labels) in enumerate(ds):
            _step(model, opt, images, labels)
            if k == 2:
                break  # mid-epoch: the stream is abandoned with batches in flight
        KEEP.append(images)
    elif kind == "exception":
        try:
            for k, (images, labels) in enumerate(ds):
                _step(model, opt, images, labels)
                if k == 2:
                    raise RuntimeError("boom inside the loop")
        except RuntimeError as e:
            KEEP.append(e)  # its traceback keeps the loop's frame, and the tensors, to the end
    elif kind == "interrupt":
        try:
            for k, (images, labels) in enumerate(ds):
                _step(model, opt, images, labels)
                if k == 2:
                    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, delivered as a real signal
                    time.sleep(1)  # a KeyboardInterrupt lands here or in the next batch's wait
        except KeyboardInterrupt as e:
            KEEP.append(e)
        else:
            raise SystemExit("no KeyboardInterrupt arrived")
    else:
        raise SystemExit(f"unknown pattern {name}")


PATTERNS = [f"{t}-{k}" for t in ("shm", "inline") for k in ("loop", "loop-close", "break", "exception", "interrupt")]


def ddp(address, dataset):
    """Under torchrun: DDP (gloo) over loaderd, ranks from the environment."""
    import torch.distributed as dist
    dist.init_process_group("gloo")
    ds = loaderd.Dataset(address, dataset, 128, seed=1, connect_timeout=30)
    model = torch.nn.parallel.DistributedDataParallel(_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    n = 0
    for images, labels in ds:
        _step(model, opt, images, labels)
        n += len(labels)
    total = torch.tensor([n])
    dist.all_reduce(total)
    if total.item() != ds.samples_per_epoch() * ds.world_size:
        raise SystemExit(f"ranks saw {total.item()} samples")
    KEEP.append(images)
    dist.destroy_process_group()


def _zygote(address, dataset, jobs, parallel):
    """Run jobs [(pattern, count)] as forked children, parallel at a time;
    returns {pattern: [exit statuses]} (a status is the exit code, or
    -SIGNAL for a child killed by a signal)."""
    todo = [p for p, n in jobs for _ in range(n)]
    results = {p: [] for p, _ in jobs}
    running = {}
    logdir = os.environ.get("EXIT_TEST_LOGS")
    k = 0
    while todo or running:
        while todo and len(running) < parallel:
            p = todo.pop(0)
            k += 1
            log = os.path.join(logdir, f"{k:04d}-{p}.log") if logdir else os.devnull
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.close(fd)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                pattern(p, address, dataset)
                raise SystemExit(0)  # through the interpreter's whole shutdown
            running[pid] = p
        pid, status = os.wait()
        p = running.pop(pid)
        results[p].append(os.waitstatus_to_exitcode(status))
    return results


def main():
    if sys.argv[1] == "--zygote":
        address, dataset = sys.argv[2], sys.argv[3]
        parallel = int(os.environ.get("EXIT_TEST_PARALLEL", "3"))
        jobs = []
        for line in sys.stdin:
            p, n = line.split()
            jobs.append((p, int(n)))
        t0 = time.monotonic()
        try:
            results = _zygote(address, dataset, jobs, parallel)
        except SystemExit:
            raise
        print(json.dumps({"results": results, "seconds": time.monotonic() - t0}), flush=True)
        return
    name, address, dataset = sys.argv[1:4]
    if name == DDP:
        ddp(address, dataset)
    else:
        pattern(name, address, dataset)


if __name__ == "__main__":
    main()
