#!/usr/bin/env bash
# python-test.sh tests the Python client as a user gets it: pip installs
# ./python into a fresh virtual environment and runs pytest from outside the
# source tree, so the tests import the installed package (a test checks
# that). The daemon is built from this checkout. Then the torchrun example
# trains with DDP on two processes. Needs the Debian packages of
# scripts/python-setup.sh. Extra arguments go to pytest. First mypy checks
# the package's annotations.
#
# /usr/bin/python3 on purpose: a python3 earlier on PATH may be another
# interpreter that cannot see Debian's packages. The venv is made with
# --system-site-packages so it sees Debian's torch, grpcio, protobuf and
# numpy; pip installs with --no-index (PyPI is not reachable here, and every
# declared dependency must already be satisfied) and --no-build-isolation
# (the build backend is Debian's setuptools, not one fetched from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export PATH="$PATH:/usr/local/go/bin"
py=/usr/bin/python3

python/protogen.sh --check

# The package's annotations (py.typed): Debian's mypy (python3-mypy, from
# python-setup.sh) with python/pyproject.toml's [tool.mypy]: seconds (torch
# and numpy are taken as Any; see there), less with the cache, kept outside
# the checkout.
(cd python && "$py" -m mypy --config-file pyproject.toml \
	--cache-dir "${LOADERD_MYPY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/loaderd-mypy}" -p loaderd -m _loaderd_cli)

work=$(mktemp -d "${TMPDIR:-/tmp}/loaderd-pytest.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/bin/" ./cmd/loaderd
export LOADERD_BIN="$work/bin/loaderd"

# Install from a copy: pip builds in the source directory, and the checkout
# should not collect build/ and *.egg-info.
mkdir "$work/src"
tar -C python --exclude=build --exclude='*.egg-info' --exclude=__pycache__ -cf - . | tar -C "$work/src" -xf -
"$py" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-index --no-build-isolation "$work/src"
"$work/venv/bin/python" -m pip show loaderd | sed -n '1,2p;/^Location/p;/^Requires/p'
export LOADERD_TEST_INSTALLED=1

# Exit code 5 is pytest's "no tests collected": a broken collection must not
# pass as an empty success.
# A hung test dumps every thread's stack after 5 minutes, and the whole run
# is stopped after 20 rather than holding CI until its own limit.
rc=0
(cd "$work" && timeout -k 30 1200 "$work/venv/bin/python" -m pytest -q -p no:cacheprovider \
	-o faulthandler_timeout=300 "$root/python/tests" "$@") || rc=$?
if [ "$rc" = 5 ]; then
	echo "python-test: pytest collected no tests" >&2
	exit 1
fi
[ "$rc" = 0 ] || exit "$rc"

# DDP with two processes under torchrun (gloo, CPU): local rank 0 starts
# the node's daemon with loaderd.serve(); the example checks that the
# ranks' shares are disjoint and complete and that the loss falls, and exits
# non-zero otherwise. Debian's torchrun (torch 1.13 on Python 3.11) needs
# --redirects 1 --tee 1: its default --redirects 0 parses to None under
# Python 3.11, whose IntFlag no longer iterates the zero member Std.NONE,
# and the launcher dies with "AttributeError: 'NoneType' object has no
# attribute 'get'". Run through the venv's python so that the workers
# import the installed package.
(cd "$work" && OMP_NUM_THREADS=1 timeout -k 30 300 "$work/venv/bin/python" -m torch.distributed.run \
	--standalone --nproc_per_node=2 --monitor_interval 0.2 --redirects 1 --tee 1 --log_dir "$work/torchrun" \
	"$root/python/examples/ddp.py" --epochs 3)
echo "python-test: all passed"
