#!/usr/bin/env bash
# protogen.sh regenerates the Python stubs of proto/loaderd/v1/loader.proto
# into loaderd/v1/ (committed, so users need no protoc).
#
#   python/protogen.sh          regenerate
#   python/protogen.sh --check  fail if the committed stubs are stale
#
# It uses Debian's python3-grpc-tools (scripts/python-setup.sh installs it),
# whose bundled protoc is old (3.5.1); its output imports fine with Debian's
# python3-protobuf 4.21 under both the cpp and pure-Python implementations.
# The proto's package path loaderd/v1 becomes the Python subpackage
# loaderd.v1, which is what the generated gRPC module imports.
set -euo pipefail
cd "$(dirname "$0")"
root=..
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
/usr/bin/python3 -m grpc_tools.protoc -I "$root/proto" --python_out="$out" --grpc_python_out="$out" \
	"$root/proto/loaderd/v1/loader.proto"
if [ "${1:-}" = --check ]; then
	for f in loader_pb2.py loader_pb2_grpc.py; do
		cmp -s "$out/loaderd/v1/$f" "loaderd/v1/$f" || { echo "protogen: loaderd/v1/$f is stale; run python/protogen.sh" >&2; exit 1; }
	done
	echo "protogen: python stubs up to date"
	exit 0
fi
cp "$out/loaderd/v1/loader_pb2.py" "$out/loaderd/v1/loader_pb2_grpc.py" loaderd/v1/
echo "protogen: wrote python/loaderd/v1/loader_pb2.py, loader_pb2_grpc.py"
