#!/usr/bin/env bash
# Installs NVRTC (CUDA's run-time compiler, CUDA 11.8) from Debian bookworm's
# non-free component, so that trainer/cuda's tests compile every embedded
# kernel to PTX on a machine without a GPU. Idempotent: quick when present.
set -euo pipefail
have() { ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so' || ls /usr/lib/x86_64-linux-gnu/libnvrtc.so* >/dev/null 2>&1; }
if have; then
  echo "nvrtc-setup: libnvrtc already installed"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
src=/etc/apt/sources.list.d/non-free.sources
if [ ! -f "$src" ]; then
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: contrib non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
    $sudo tee "$src" >/dev/null
fi
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends libnvrtc11.2
have || { echo "nvrtc-setup: libnvrtc still missing after install" >&2; exit 1; }
echo "nvrtc-setup: installed libnvrtc11.2"
