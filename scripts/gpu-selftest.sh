#!/usr/bin/env bash
# gpu-selftest.sh keeps scripts/gpu-bundle.sh and scripts/gpu-check.sh from
# rotting on machines without a GPU (CI): it builds a --quick bundle (no
# data, no compression) in a temporary directory, runs every step of
# gpu-check.sh against the CPU fallback, and checks the results file: each
# step reported, the GPU-only steps skipped with their reason, the others
# passed. On a GPU machine it checks that nothing was skipped for want of one.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/loaderd-gpu-selftest.XXXXXX")
trap 'rm -rf "$work"' EXIT
./scripts/gpu-bundle.sh --quick --no-data "$work/bundle" >/dev/null
res=$work/out/gpu-check.md
rc=0
GPU_CHECK_WORK=$work/run ./scripts/gpu-check.sh --bundle "$work/bundle" --results "$res" --deadline 300 >"$work/log" 2>&1 || rc=$?
fail() { echo "gpu-selftest: $*"; cat "$work/log"; echo "--- $res:"; cat "$res" 2>/dev/null; exit 1; }
[ "$rc" = 0 ] || fail "gpu-check.sh exited $rc"
[ -f "$res" ] && [ -f "$work/out/gpu-check-logs.tar.gz" ] || fail "no results file or logs"
for h in "- date: " "- device: " "- driver: " "- command: " "## summary"; do
  grep -qF -- "$h" "$res" || fail "results lack '$h'"
done
row() { grep -E "^\| $1 \| " "$res" || fail "summary has no row for $1"; }
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  ! grep -q 'skipped: no GPU' "$res" || fail "a GPU is here, yet steps were skipped for want of one"
else
  for s in sanitizer transfer profile; do row $s | grep -q 'skipped: no GPU' || fail "$s not skipped for want of a GPU"; done
  for s in facts cuda-test devices cifar batch-auto; do row $s | grep -q '| passed |' || fail "$s did not pass on the CPU fallback"; done
  torch_ok='passed|skipped: no python3 with torch'
  # Without the shared CIFAR tar (a checkout not beside ../shared) the CPU
  # smoke run has no data, as the Go tests that need it skip.
  [ -f ../shared/data/cifar10-train-jpg.tar ] || torch_ok="$torch_ok|skipped: no CUDA for torch and no CIFAR tar for the CPU smoke run"
  row torch | grep -qE "\| ($torch_ok) \|" || fail "torch neither passed nor skipped for want of torch or data"
  grep -q 'CPU fallback, no GPU figures' "$res" || fail "results do not say they hold no GPU figures"
  grep -q 'using CPU devices' "$res" || fail "trainer devices did not list the CPU fallback"
  grep -qE 'cnn \([0-9]+ parameters\) on 2 cpu device' "$res" || fail "the cifar smoke run did not train on the CPU devices"
  grep -qE '^epochs: auto, [0-9]+: a probe of [0-9]+ steps ran at [0-9]+ images/s' "$res" || fail "CIFAR_EPOCHS=auto did not size the cifar run from a probe"
  grep -qE -- '--transport shm --epochs [0-9]+$' "$res" || fail "the cifar run was not given the sized --epochs"
  grep -qE '^batch auto on 2 cpu device\(s\): [0-9]+$' "$res" || fail "--batch auto found no batch under --device-memory"
fi
echo "gpu-selftest: gpu-bundle.sh and gpu-check.sh work ($(grep -c '^| .* | passed |' "$res") steps passed, $(grep -c '^| .* | skipped' "$res") skipped)"
