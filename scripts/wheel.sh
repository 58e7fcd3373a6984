#!/usr/bin/env bash
# wheel.sh [OUTDIR] builds the loaderd wheels: the Python client with the
# daemon inside (loaderd/bin/loaderd), one per Linux CPU, into OUTDIR
# (default dist/):
#
#   loaderd-VERSION-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
#   loaderd-VERSION-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl
#
# `pip install FILE.whl` then gives `import loaderd`, loaderd.serve() with
# the bundled daemon and the `loaderd` command, with no Go and no checkout.
#
# The daemon is built with CGO_ENABLED=0: the same build for amd64 and
# arm64 with no C toolchain, no cgo warnings, and nothing of this machine's
# glibc in the binary (cmd/loaderd has no cgo of its own; cgo would only
# bring the C resolvers of net and os/user, and a binary that needs this
# build host's glibc, 2.36). It still links libc.so.6, libdl.so.2 and
# libpthread.so.0 dynamically, unversioned (purego's dlopen of
# libturbojpeg), hence manylinux_2_17 (python/setup.py explains the tag).
#
# Reproducible from the same sources and Go: -trimpath, no build ID, no
# symbol table; the wheel's timestamps are SOURCE_DATE_EPOCH (default: the
# last commit's time). Offline: the wheel is built by this Python's
# setuptools and wheel (Debian's python3-setuptools, python3-wheel), with
# no build isolation and no index. WHEEL_ARCHES (default "amd64 arm64")
# picks the CPUs; PYTHON the interpreter (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PATH="$PATH:/usr/local/go/bin" GOWORK=off CGO_ENABLED=0
py=${PYTHON:-/usr/bin/python3}
arches=${WHEEL_ARCHES:-amd64 arm64}
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' python/loaderd/__init__.py)
[ -n "$version" ] || { echo "wheel: no __version__ in python/loaderd/__init__.py" >&2; exit 1; }
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)}

work=$(mktemp -d "${TMPDIR:-/tmp}/loaderd-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
for arch in $arches; do
	case $arch in
	amd64) plat=x86_64 ;;
	arm64) plat=aarch64 ;;
	*) echo "wheel: GOARCH $arch: want amd64 or arm64" >&2; exit 1 ;;
	esac
	# Build from a copy: the checkout keeps no binary, build/ or *.egg-info,
	# and a source install of ./python stays the pure client.
	src=$work/$arch
	mkdir -p "$src"
	tar -C python --exclude=build --exclude='*.egg-info' --exclude=__pycache__ --exclude=./loaderd/bin \
		--exclude=./examples --exclude=./tests --exclude=./compare.png -cf - . | tar -C "$src" -xf -
	GOOS=linux GOARCH=$arch go build -trimpath -ldflags='-s -w -buildid=' -o "$src/loaderd/bin/loaderd" ./cmd/loaderd
	rm -f "$out/loaderd-$version-py3-none-"*"_$plat.whl"
	(cd "$src" && "$py" -m pip wheel -q --no-deps --no-build-isolation --no-index -w "$out" . 2>&1 |
		{ grep -v "Setuptools is replacing distutils\|warnings.warn(\"Setuptools is replacing" || true; })
	whl=$(ls "$out/loaderd-$version-py3-none-"*"_$plat.whl")
	printf 'wheel: %s (%s MiB, daemon %s MiB) sha256 %s\n' "$whl" \
		"$(( $(stat -c %s "$whl") / 1048576 ))" "$(( $(stat -c %s "$src/loaderd/bin/loaderd") / 1048576 ))" \
		"$(sha256sum "$whl" | cut -d' ' -f1)"
done
