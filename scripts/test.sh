#!/usr/bin/env bash
# The project's tests: what CI runs, and what a developer runs before pushing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
# go-nvml's cgo prints deprecation warnings from NVIDIA's header; they are noise.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
export PATH="$PATH:$(go env GOPATH)/bin"
# Compiling every CUDA kernel with NVRTC is a test, not an optional extra
# (scripts/nvrtc-setup.sh installs it).
export LOADERD_REQUIRE_NVRTC="${LOADERD_REQUIRE_NVRTC:-1}"
# The same for libjpeg-turbo: the JPEG tests compare its pixels with PIL's
# (scripts/jpeg-setup.sh installs it).
export LOADERD_REQUIRE_TURBO="${LOADERD_REQUIRE_TURBO:-1}"

# What the tests need; each step is quick when already done.
# grpcurl is the outside client the reflection and health test drives.
command -v grpcurl >/dev/null || go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4
# staticcheck, pinned: a new release may add checks, and CI must not fail on its own.
[ "$(staticcheck -version 2>/dev/null)" = "staticcheck 2026.2.2 (0.8.2)" ] \
  || go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
# NVRTC (Debian non-free) compiles the CUDA kernels to PTX, GPU or not.
./scripts/nvrtc-setup.sh
# Debian's torch, torchvision, grpcio, numpy and pytest for the Python client.
./scripts/python-setup.sh
# Open MPI: the multi-process trainer tests run `mpirun -n 2` (as root here).
./scripts/mpi-setup.sh
export LOADERD_REQUIRE_MPI="${LOADERD_REQUIRE_MPI:-1}"
# libturbojpeg0 (the JPEG decoder PIL's libjpeg-turbo matches) and the
# photographs the large-image set is cut from.
./scripts/jpeg-setup.sh
# versitygw, the real S3 server the s3:// tests start on loopback; a test
# that needs it fails rather than skips without it.
./scripts/s3-setup.sh
export LOADERD_REQUIRE_S3="${LOADERD_REQUIRE_S3:-1}"

. scripts/lib/modules.sh
# Every module's tests that need a daemon run this one (client/clienttest).
bin=$(mktemp -d "${TMPDIR:-/tmp}/loaderd-test-bin.XXXXXX")
trap 'rm -rf "$bin"' EXIT
build_commands "$bin"
export LOADERD_BIN="$bin/loaderd"
export TRAINER_BIN="$bin/trainer" # docs/DEPLOY.md's recipe test runs it (internal/multihost)
# in_modules CMD...: run CMD in every module's directory.
in_modules() {
  local m
  for m in "${MODULES[@]}"; do
    (cd "$m" && "$@") || { echo "in module $m: $* failed"; return 1; }
  done
}

test -z "$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go') | grep -v '\.pb\.go$' || true)" \
  || { echo "gofmt would change:"; gofmt -l . | grep -v '\.pb\.go$'; exit 1; }
# The generated protobuf code must be what the .proto and the pinned
# generators make.
./scripts/protogen.sh --check
in_modules go vet ./...
in_modules staticcheck ./...
# The other platforms loaderd builds for (scripts/cross.sh says which
# packages each one covers), and the pure-Go tests on arm64 under qemu.
./scripts/cross.sh
in_modules go test -count=1 ./...
# The concurrent packages again under the race detector. Exhaustive
# sweeps skip themselves there (raceEnabled); the timeout leaves room for
# a machine that other work slows down (go test's 10 minutes did not, for
# loader/imagedec on two busy cores, before its sweeps left the race run).
race=(go test -count=1 -race -timeout 25m)
(cd sampler && "${race[@]}" ./...)
(cd pinned && "${race[@]}" ./...)
(cd client && "${race[@]}" ./...)
(cd trainer && "${race[@]}" ./...)
"${race[@]}" ./loader/... ./internal/...

# Fuzz each decoder entry point for a bounded time (the seed corpora ran above).
# go test -fuzz can report "context deadline exceeded" with no failing
# input when -fuzztime ends while a worker is inside a slow input; that is
# the fuzzer's clock, not a finding, so it gets one more run. A real
# finding writes its input under testdata/fuzz and fails at once.
fuzz() {
  local out
  for try in 1 2; do
    if out=$(cd "$1" && go test -run '^$' -fuzz "^$3\$" -fuzztime "${FUZZTIME:-10s}" "$2" 2>&1); then
      echo "$out" | tail -n 2
      return 0
    fi
    echo "$out" | tail -n 20
    if [ "$try" = 2 ] || ! echo "$out" | grep -q 'context deadline exceeded' || echo "$out" | grep -q 'Failing input written'; then
      return 1
    fi
    echo "fuzz $3: the fuzzer's deadline, not a finding; once more"
  done
}
# MODULE:PACKAGE, the package relative to its module.
for at in .:./loader/ .:./loader/imagedec/ .:./loader/format/tar/ .:./loader/format/arrow/ .:./loader/format/parquet/ \
  .:./loader/imagedec/jpegx/ client:./wire/; do
  mod=${at%%:*} pkg=${at#*:}
  targets=$(cd "$mod" && go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
  [ -n "$targets" ] || { echo "no fuzz targets in $mod/$pkg"; exit 1; }
  for target in $targets; do fuzz "$mod" "$pkg" "$target"; done
done
# The Python client against a daemon built from this checkout
# (needs scripts/python-setup.sh's Debian packages).
./scripts/python-test.sh
# The GPU machine's script, run against the CPU fallback, so it cannot rot
# between the sessions that have a GPU (about 40 s).
./scripts/gpu-selftest.sh
echo "scripts/test.sh: all checks passed"
