#!/usr/bin/env bash
# protogen.sh regenerates the Go code under proto/ with pinned tools, so the
# generated files (which name the tool versions) only change when the .proto
# does.
#
#   scripts/protogen.sh          install missing tools, regenerate
#   scripts/protogen.sh --check  also fail if regeneration changed any file
#                                (for CI; leaves the regenerated files)
#
# protoc comes from Debian's protobuf-compiler (3.21.12, bookworm); the
# plugins from go install at the versions below. Installing protoc needs root.
set -euo pipefail

PROTOC_VERSION=3.21.12
PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2

check=0
case "${1:-}" in
--check) check=1 ;;
"") ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."

if ! command -v protoc >/dev/null 2>&1; then
	echo "protogen: installing protobuf-compiler" >&2
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q protobuf-compiler
fi
have=$(protoc --version | awk '{print $2}')
if [ "$have" != "$PROTOC_VERSION" ]; then
	echo "protogen: protoc $have found, want $PROTOC_VERSION (generated headers would differ)" >&2
	exit 1
fi

gobin=$(go env GOBIN)
gobin=${gobin:-$(go env GOPATH)/bin}
export PATH="$gobin:$PATH"
# One go install per module: a single call cannot mix modules at two versions.
"$gobin/protoc-gen-go" --version 2>/dev/null | grep -qx "protoc-gen-go ${PROTOC_GEN_GO##*@}" ||
	go install "$PROTOC_GEN_GO"
"$gobin/protoc-gen-go-grpc" --version 2>/dev/null | grep -qx "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC##*@v}" ||
	go install "$PROTOC_GEN_GO_GRPC"

gen_files() { find proto -name '*.pb.go' -type f | sort; }
before=$(gen_files | xargs -r sha256sum)
(cd proto && GOWORK=off go generate ./...)
after=$(gen_files | xargs -r sha256sum)

if [ "$check" = 1 ] && [ "$before" != "$after" ]; then
	echo "protogen: generated code was stale; regenerated files differ:" >&2
	diff <(echo "$before") <(echo "$after") >&2 || true
	exit 1
fi
echo "protogen: ok ($(gen_files | paste -sd " " -))"
