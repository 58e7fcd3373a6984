#!/usr/bin/env bash
# The main job on the built-in default: loaderd serves the synthetic
# CIFAR-shaped dataset and a trainer consumes two epochs from it end to end.
# Extra arguments go to `trainer consume` (e.g. --transport shm --epochs 5).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
# go-nvml's cgo prints deprecation warnings from NVIDIA's header; they are noise.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
bin=$(mktemp -d)
sock="$bin/loaderd.sock"
daemon=""
trap '[ -n "$daemon" ] && kill -TERM "$daemon" 2>/dev/null; wait 2>/dev/null; rm -rf "$bin"' EXIT
. scripts/lib/modules.sh
build_commands "$bin"

"$bin/loaderd" serve --unix "$sock" --listen 127.0.0.1:0 --log-level warn &
daemon=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done

"$bin/trainer" datasets --addr "unix://$sock"
"$bin/trainer" consume --addr "unix://$sock" --epochs 2 "$@"

kill -TERM "$daemon"
wait "$daemon"
trap 'rm -rf "$bin"' EXIT
echo "loaderd stopped cleanly"
