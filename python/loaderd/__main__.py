"""python -m loaderd: look at a running daemon.

    python -m loaderd datasets ADDRESS                   the datasets it serves
    python -m loaderd names ADDRESS DATASET [START [COUNT]]
                                                         file or member names of dataset indices
    python -m loaderd version
"""

import argparse
import sys

from . import __version__
from ._errors import Error
from ._rpc import list_datasets, sample_names


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m loaderd", description="Look at a running loaderd daemon.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("datasets", help="list the datasets a daemon serves")
    d.add_argument("address", help="HOST:PORT, unix:///PATH or a socket path; or a pool: A,B or dns:///NAME:PORT")
    d.add_argument("--wait", type=float, default=2.0, help="seconds to wait for a daemon that is starting")
    n = sub.add_parser("names", help="file or archive member names of dataset indices")
    n.add_argument("address")
    n.add_argument("dataset")
    n.add_argument("start", type=int, nargs="?", default=0)
    n.add_argument("count", type=int, nargs="?", default=20)
    n.add_argument("--wait", type=float, default=2.0)
    sub.add_parser("version", help="the client's version")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "version":
            print(f"loaderd Python client {__version__}")
        elif args.cmd == "datasets":
            infos = list_datasets(args.address, connect_timeout=args.wait)
            rows = [("NAME", "FORMAT", "SAMPLES", "SHAPE (HxWxC)", "CLASSES", "DEFAULT AUGMENT")]
            for i in infos:
                rows.append((i.name, i.format, f"{i.size:,}", "x".join(map(str, i.shape)), str(len(i.classes)),
                             i.default_augment))
            widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
            for r in rows:
                print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
            if not infos:
                print("(no datasets)")
        elif args.cmd == "names":
            for k, name in enumerate(sample_names(args.address, args.dataset, args.start, args.count,
                                                  connect_timeout=args.wait)):
                print(f"{args.start + k}\t{name}")
    except (Error, ValueError) as e:
        print(f"python -m loaderd: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
