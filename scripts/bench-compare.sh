#!/usr/bin/env bash
# bench-compare.sh runs one benchmark of this tree and of an older commit
# in turns, so the two see the same machine: on a shared VM whose speed
# drifts, only a pair run side by side compares.
#
#   scripts/bench-compare.sh REV PKG REGEXP [ROUNDS] [BENCHTIME]
#   e.g. scripts/bench-compare.sh e21e31d ./benchmarks 'Pipeline/src=cifar/out=f32/workers=2$' 3 2s
#
# PKG is a package of the daemon's module. Both test binaries run from
# this tree's package directory, so they read the same test data.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin" GOWORK=off
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
[ $# -ge 3 ] || { sed -n '2,10p' "$0"; exit 2; }
rev=$1 pkg=$2 re=$3 rounds=${4:-3} benchtime=${5:-2s}
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-compare.XXXXXX")
trap 'git worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --detach "$work/old" "$rev" >/dev/null
(cd "$work/old" && go test -c -o "$work/old.test" "$pkg")
go test -c -o "$work/new.test" "$pkg"
for r in $(seq "$rounds"); do
  for v in old new; do
    (cd "$pkg" && "$work/$v.test" -test.run '^$' -test.bench "$re" -test.benchtime "$benchtime") |
      grep '^Benchmark' | sed "s/^/round $r $v  /"
  done
done
