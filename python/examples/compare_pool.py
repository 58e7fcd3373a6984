#!/usr/bin/python3
"""A pool of two loaderd daemons feeding one PyTorch trainer, against
torchvision's DataLoader, on the large-image set (made by
scripts/make-large-images.py into ~/.cache/loaderd/large-images-v1.tar)
under the ImageNet training transform: RandomResizedCrop(224),
RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet), batches of 32.

    /usr/bin/python3 python/examples/compare_pool.py [--tar PATH] [--images N] [--loaderd BIN]

Each daemon is a process of its own pinned to one core (taskset -c 0 and
-c 1, GOMAXPROCS=1, --workers 1): a CPU host of one core each. They serve
TLS 1.3 with client certificates and a bearer token on 127.0.0.1 (the
certificates are made here with openssl, as docs/DEPLOY.md's recipe
does). The trainer reads one rank from the pool "127.0.0.1:P1,127.0.0.1:P2"
as uint8 on the wire with normalize_on="cpu" (no GPU here; "cuda" where
there is one). DataLoader reads the same JPEGs with num_workers 1 and 2.
The runs are interleaved, --repeats times, and the medians printed, with
the pool's ratio to the best DataLoader and the CPU the trainer process
itself spends per image received (time.process_time: every thread of it,
gRPC's included). Also measured: one of the daemons alone, for the pool's
speed-up.
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from common import daemon_binary, loaderd  # noqa: E402
from compare_imagenet import TarImages, rate  # noqa: E402

AUGMENT = "random_resized_crop=224,flip=0.5,normalize=imagenet,out=f32:chw"
TOKEN = "compare-pool-token-0123456789"


def openssl(d, *args):
    subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)


def certs(d):
    """A CA, a server certificate for 127.0.0.1, a client certificate and
    a token file, in d."""
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl(d, "req", "-x509", *key, "-days", "1", "-subj", "/CN=loaderd-ca", "-keyout", "ca.key", "-out", "ca.crt")
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
                      ("trainer", "extendedKeyUsage=clientAuth")):
        openssl(d, "req", *key, "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.csr")
        (d / f"{name}.ext").write_text(ext + "\n")
        openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "1", "-extfile", f"{name}.ext", "-out", f"{name}.crt")
    (d / "tokens").write_text(f"{TOKEN} datasets=large\n")
    return dict(tls_ca=d / "ca.crt", tls_cert=d / "trainer.crt", tls_key=d / "trainer.key", token=TOKEN)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, tar, d, core, tls):
    """A daemon pinned to core, serving TLS on 127.0.0.1; its address."""
    addr = f"127.0.0.1:{free_port()}"
    log = open(d / f"loaderd{core}.log", "wb")
    p = subprocess.Popen(["taskset", "-c", str(core), binary, "serve", "--listen", addr, "--workers", "1",
                          "--log-level", "warn", "--tls-cert", d / "server.crt", "--tls-key", d / "server.key",
                          "--tls-client-ca", d / "ca.crt", "--auth-tokens", d / "tokens",
                          "--dataset", f"large=tar:{tar}?size=any"],
                         env=dict(os.environ, GOMAXPROCS="1"), stdout=log, stderr=log)
    loaderd.list_datasets(addr, connect_timeout=30, **tls)
    return p, addr


def loaderd_rate(address, images, batch, tls):
    """images/s of one rank's stream from address (a daemon or a pool),
    after its first batches, and the trainer's CPU seconds per image."""
    ds = loaderd.Dataset(address, "large", batch, seed=1, augment=AUGMENT, normalize_on="cpu", transport="inline",
                         **tls)
    it = ds.batches(None)
    for _ in range(4):  # the daemons' first batches, before the clock
        next(it)
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    for b in it:
        assert b.images.dtype == torch.float32 and b.images.shape[1:] == (3, 224, 224)
        n += len(b)
        if n >= images:
            break
    el, cpu = time.perf_counter() - t0, time.process_time() - c0
    ds.close()
    return n / el, cpu / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tar", default=os.path.expanduser("~/.cache/loaderd/large-images-v1.tar"))
    ap.add_argument("--images", type=int, default=1280, help="images timed per run")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--loaderd", help="a built loaderd binary (default: $LOADERD_BIN, PATH, or built here)")
    a = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("compare_pool: needs two cores, one per daemon")
    torch.set_num_threads(1)
    work = pathlib.Path(tempfile.mkdtemp(prefix="compare-pool-"))
    binary = a.loaderd or daemon_binary(work)
    tls = certs(work)
    procs = []
    try:
        for core in (0, 1):
            procs.append(start(binary, a.tar, work, core, tls))
        pool = ",".join(addr for _, addr in procs)
        ds = TarImages(a.tar)
        print(f"{len(ds)} images in {a.tar}; torch {torch.__version__}; daemons {pool} (TLS, client certificates, "
              f"token), one core each")
        dl = {w: [] for w in (1, 2)}
        runs = {"pool": [], "one": []}
        for _ in range(a.repeats):
            for w in dl:
                dl[w].append(rate(ds, w, a.images, a.batch))
            runs["pool"].append(loaderd_rate(pool, a.images, a.batch, tls))
            runs["one"].append(loaderd_rate(procs[0][1], a.images, a.batch, tls))
        med = {k: statistics.median(r for r, _ in v) for k, v in runs.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
        best = max(statistics.median(v) for v in dl.values())
        print("| input | workers | images/s | × best DataLoader | trainer CPU µs/image |")
        print("|---|---|---:|---:|---:|")
        for w, rs in dl.items():
            print(f"| DataLoader | num_workers={w} | {statistics.median(rs):.0f} | {statistics.median(rs) / best:.2f}× | |")
        print(f"| loaderd, one daemon | 1 core | {med['one']:.0f} | {med['one'] / best:.2f}× | {cpu['one'] * 1e6:.0f} |")
        print(f"| loaderd, pool of two | 1 core each | {med['pool']:.0f} | {med['pool'] / best:.2f}× | "
              f"{cpu['pool'] * 1e6:.0f} |")
        print(f"pool / best DataLoader: {med['pool'] / best:.2f}x; pool / one daemon: {med['pool'] / med['one']:.2f}x; "
              f"the trainer process spent {cpu['pool'] * 1e6:.0f} µs of CPU per image "
              f"({cpu['pool'] * med['pool']:.2f} of a core at the pool's rate)")
        print(f"runs: pool {[round(r) for r, _ in runs['pool']]}, DataLoader(2) {[round(r) for r in dl[2]]}")
        # Each round's pool against that round's best DataLoader: rounds a
        # minute apart see a VM whose speed drifts by a third.
        per = [p / max(dl[w][i] for w in dl) for i, (p, _) in enumerate(runs["pool"])]
        print(f"pool / best DataLoader, round by round: {[round(r, 2) for r in per]}; median {statistics.median(per):.2f}x")
    finally:
        for p, _ in procs:
            p.terminate()
        for p, _ in procs:
            p.wait(15)


if __name__ == "__main__":
    main()
