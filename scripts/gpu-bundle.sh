#!/usr/bin/env bash
# gpu-bundle.sh builds, on this machine, everything a GPU machine needs to
# run scripts/gpu-check.sh: the lent GPU machines have no Go toolchain and
# no network, and their time should go to measuring. It fills one
# git-ignored directory (default .gpu-bundle) that the device tool carries
# (`run` with carry [".gpu-bundle"]); the python client and the scripts
# travel with the working tree.
#
#   scripts/gpu-bundle.sh [--quick] [--no-data] [DIR]
#
#   bin/loaderd, bin/trainer    the daemon and the trainer (x86-64, cgo for NVML)
#   test/<pkg>.test             `go test -c` of the GPU-relevant packages
#   lib/libturbojpeg.so.0       the JPEG decoder loaderd dlopens, when present here
#   lib/libjpeg.so.62           libjpeg-turbo's libjpeg API, for decode-and-crop
#   data/cifar10-train-jpg.tar.gz   the shared CIFAR-10 JPEG tar (16 MB gzipped)
#   MANIFEST                    what was built, from which tree, with sizes
#
# Full mode strips the binaries and xz-compresses them (gpu-check.sh
# unpacks them), so the bundle plus the working tree stay well under the
# device tool's 64 MiB. --quick skips the compression (for the self-test);
# --no-data leaves the CIFAR tar out.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

quick=0 data=1 dir=.gpu-bundle
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --no-data) data=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "gpu-bundle: unknown flag $1" >&2; exit 2 ;;
    *) dir=$1 ;;
  esac
  shift
done
[ "$(go env GOARCH)" = amd64 ] && [ "$(go env GOOS)" = linux ] \
  || { echo "gpu-bundle: the GPU machines are linux/amd64; this Go builds $(go env GOOS)/$(go env GOARCH)" >&2; exit 1; }

# Packages whose tests need (or prove something about) a GPU.
test_pkgs=(./cuda ./cuda/driver ./cuda/kernels ./nccl ./devices) # in the trainer module

rm -rf "$dir/bin" "$dir/test" "$dir/lib" "$dir/MANIFEST"
mkdir -p "$dir/bin" "$dir/test" "$dir/lib" "$dir/data"
# Stripped for carrying; --quick builds as go test does, so the build cache
# of a test run serves it (the self-test in scripts/test.sh).
flags=(-trimpath -ldflags='-s -w')
[ "$quick" = 0 ] || flags=()
t0=$SECONDS
. scripts/lib/modules.sh
build_commands "$dir/bin" ${flags[@]+"${flags[@]}"}
test_dir=$(cd "$dir/test" && pwd)
(cd trainer && go test -c ${flags[@]+"${flags[@]}"} -o "$test_dir/" "${test_pkgs[@]}")
for lib in /usr/lib/x86_64-linux-gnu/libturbojpeg.so.0 /usr/lib/x86_64-linux-gnu/libjpeg.so.62; do
  [ -e "$lib" ] && cp -L "$lib" "$dir/lib/"
done
if [ "$data" = 1 ]; then
  tar=../shared/data/cifar10-train-jpg.tar
  out="$dir/data/cifar10-train-jpg.tar.gz"
  if [ ! -f "$out" ] || [ "$tar" -nt "$out" ]; then
    [ -f "$tar" ] || { echo "gpu-bundle: $tar missing (--no-data to leave it out)" >&2; exit 1; }
    gzip -6 -c "$tar" >"$out.tmp" && mv "$out.tmp" "$out"
  fi
else
  rm -f "$dir/data/"*.tar.gz
fi
if [ "$quick" = 0 ]; then
  # xz halves what gzip leaves of a Go binary; gpu-check.sh falls back to
  # Python's lzma where the xz tool is missing.
  for f in "$dir"/bin/* "$dir"/test/* "$dir"/lib/*; do
    [ -f "$f" ] && xz -T2 -6 -f "$f"
  done
fi

{
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) by scripts/gpu-bundle.sh$([ $quick = 1 ] && echo ' --quick')"
  echo "go: $(go version)"
  echo "tree: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git status --porcelain 2>/dev/null | grep -q . && echo ' + uncommitted changes')"
  (cd "$dir" && find bin test lib data -type f -printf '%s %p\n' | sort -k2)
} >"$dir/MANIFEST"
bundle=$(du -sb "$dir" | cut -f1)
tree=$( { git ls-files; git ls-files --others --exclude-standard; } 2>/dev/null | sort -u |
  while read -r f; do [ -f "$f" ] && stat -c %s "$f"; done | awk '{s += $1} END {print s + 0}')
total=$((bundle + tree))
echo "gpu-bundle: $dir: $((bundle >> 20)) MiB (+ working tree $((tree >> 20)) MiB = $((total >> 20)) MiB of the 64 MiB a call carries) in $((SECONDS - t0)) s"
# --quick bundles are for this machine (the self-test), not for carrying.
[ "$total" -lt $((64 << 20)) ] || [ "$quick" = 1 ] || { echo "gpu-bundle: over the device tool's 64 MiB" >&2; exit 1; }
