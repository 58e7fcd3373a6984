#!/usr/bin/env bash
# protogen.sh regenerates the Python stubs of proto/loaderd/v1/loader.proto
# into loaderd/v1/ (committed, so users need no protoc).
#
#   python/protogen.sh          regenerate
#   python/protogen.sh --check  fail if the committed stubs are stale
#
# Messages (loader_pb2.py, loader_pb2.pyi): protoc 3.21.12, Debian bookworm's
# protobuf-compiler, the same protoc scripts/protogen.sh pins for Go. Its
# output is the "_builder" style (descriptors built from the serialized file
# by google.protobuf.internal.builder), which the protobuf runtimes 4.21
# through 6.x import, under upb, cpp and pure Python alike. grpc_tools'
# bundled protoc (3.5.1) writes the older style that builds descriptors
# one by one, which 4.21+ runtimes refuse ("Descriptors cannot be created
# directly", protocolbuffers/protobuf#10064); it is used only for the gRPC
# stub (loader_pb2_grpc.py), whose text does not depend on protoc's version.
#
# The proto's package path loaderd/v1 becomes the Python subpackage
# loaderd.v1, which is what the generated gRPC module imports.
set -euo pipefail
cd "$(dirname "$0")"
root=..
PROTOC_VERSION=3.21.12
have=$(protoc --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$PROTOC_VERSION" ]; then
	echo "protogen: need protoc $PROTOC_VERSION (Debian bookworm's protobuf-compiler; scripts/protogen.sh installs it), found '${have:-none}'" >&2
	exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
protoc -I "$root/proto" --python_out="$out" --pyi_out="$out" "$root/proto/loaderd/v1/loader.proto"
/usr/bin/python3 -m grpc_tools.protoc -I "$root/proto" --grpc_python_out="$out" "$root/proto/loaderd/v1/loader.proto"
files="loader_pb2.py loader_pb2.pyi loader_pb2_grpc.py"
if [ "${1:-}" = --check ]; then
	for f in $files; do
		cmp -s "$out/loaderd/v1/$f" "loaderd/v1/$f" || { echo "protogen: loaderd/v1/$f is stale; run python/protogen.sh" >&2; exit 1; }
	done
	echo "protogen: python stubs up to date (protoc $PROTOC_VERSION)"
	exit 0
fi
for f in $files; do cp "$out/loaderd/v1/$f" loaderd/v1/; done
echo "protogen: wrote python/loaderd/v1/{${files// /,}} with protoc $PROTOC_VERSION"
