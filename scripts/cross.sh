#!/usr/bin/env bash
# cross.sh checks loaderd beyond linux/amd64, where CI runs:
#
#   linux/arm64   (Grace CPUs: GH200, GB200) every module builds and vets;
#                 the pure-Go tests of sampler, augment, client (with the
#                 wire codec), loader and its JPEG decoder run under
#                 qemu-user (scripts/qemu-setup.sh)
#   -tags purego  (amd64 without our assembly) every module vets
#   darwin/arm64  (developers' laptops) every module vets, the client and
#                 the trainer's command build; what works there is in
#                 docs/ARCHITECTURE.md ("Platforms")
#
# cgo is off for the other platforms, as a cross build without a C
# toolchain has it: go-nvml then compiles out (trainer/devices says so).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
. scripts/lib/modules.sh
./scripts/qemu-setup.sh

t0=$SECONDS
for m in "${MODULES[@]}"; do
  # && throughout: errexit does not apply inside the left of an ||.
  (
    cd "$m" &&
      GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go vet ./... &&
      go vet -tags purego ./... &&
      GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go vet ./...
  ) || { echo "cross: module $m failed"; exit 1; }
done
# vet type-checks every package and test for darwin; the client's side is
# also built and linked there (the daemon's build would add minutes of
# code generation to CI for what vet already checks).
(cd client && GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build ./...)
(cd cmd/trainer && GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build -o /dev/null .)
echo "cross: linux/arm64, purego and darwin/arm64 vet clean ($((SECONDS - t0)) s)"
# The Go code behind the decoders' and the resampler's assembly, on amd64:
# what other architectures and -tags purego builds run.
go test -count=1 -short -tags purego ./loader/imagedec/... ./augment/

# The tests on arm64. qemu-user delivers SIGBUS without its address, so
# the few tests of faults in truncated mappings skip (LOADERD_QEMU_USER);
# there is no arm64 libjpeg-turbo, so its tests do not insist on it.
t0=$SECONDS
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu LOADERD_QEMU_USER=1 LOADERD_REQUIRE_TURBO=0
arm64_test() { (cd "$1" && shift && GOARCH=arm64 CGO_ENABLED=0 go test -count=1 -exec qemu-aarch64-static "$@"); }
arm64_test sampler ./...
arm64_test client ./...
arm64_test . ./augment/... ./loader/ ./loader/imagedec/...
echo "cross: arm64 tests passed under qemu ($((SECONDS - t0)) s)"
