#!/usr/bin/env bash
# qemu-setup.sh installs Debian's qemu-user-static, which runs the arm64
# test binaries scripts/cross.sh builds (go test -exec). Idempotent.
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"
# libc6-arm64-cross: the arm64 dynamic loader and libc that test binaries
# linking purego need (QEMU_LD_PREFIX=/usr/aarch64-linux-gnu).
apt_ensure qemu-setup qemu-user-static libc6-arm64-cross
command -v qemu-aarch64-static >/dev/null || { echo "qemu-setup: no qemu-aarch64-static after install" >&2; exit 1; }
