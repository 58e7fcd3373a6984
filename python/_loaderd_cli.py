"""The `loaderd` command of a wheel that carries the daemon: it runs the
bundled binary (loaderd/bin/loaderd) in its place (exec: same process,
signals and exit status), with the command's arguments, e.g.

    loaderd serve --dataset train=cifar:/data/cifar-10-batches-bin --unix /run/loaderd.sock

A module of its own, outside the loaderd package, so that the command does
not import the client (and torch, seconds) before it starts the daemon.
"""

import importlib.util
import os
import sys
from typing import List, Optional


def bundled_daemon() -> Optional[str]:
    """The daemon inside the installed loaderd package, or None."""
    spec = importlib.util.find_spec("loaderd")  # locates the package without importing it
    for d in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(d, "bin", "loaderd")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def main(argv: Optional[List[str]] = None) -> int:
    exe = bundled_daemon()
    if exe is None:
        print("loaderd: this installation of the loaderd package carries no daemon (loaderd/bin/loaderd): "
              "install a wheel built by scripts/wheel.sh, or build one from the loaderd repository "
              "(go build -o bin/ ./cmd/loaderd)", file=sys.stderr)
        return 127
    args = sys.argv[1:] if argv is None else list(argv)
    os.execv(exe, ["loaderd"] + args)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
