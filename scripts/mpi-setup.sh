#!/usr/bin/env bash
# Installs Open MPI (4.1.4, Debian bookworm main: openmpi-bin for mpirun,
# libopenmpi3 for libmpi.so.40), so that the multi-process trainer tests run
# `mpirun -n 2`. The trainer loads libmpi at run time (no cgo, no headers).
# Idempotent: quick when present.
set -euo pipefail
have() { command -v mpirun >/dev/null && { ldconfig -p 2>/dev/null | grep -q 'libmpi\.so\.40' || ls /usr/lib/x86_64-linux-gnu/libmpi.so.40 >/dev/null 2>&1; }; }
if have; then
  echo "mpi-setup: Open MPI already installed"
  exit 0
fi
. "$(dirname "$0")/lib/apt.sh"
apt_ensure mpi-setup openmpi-bin libopenmpi3
have || { echo "mpi-setup: Open MPI still missing after install" >&2; exit 1; }
echo "mpi-setup: installed $(mpirun --version 2>/dev/null | head -n 1)"
