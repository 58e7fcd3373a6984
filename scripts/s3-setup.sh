#!/usr/bin/env bash
# versitygw, the real S3 server the object-storage tests start on
# loopback (loader/objstore/s3test): pinned, built once with go install
# (~2 min cold, ~80 MB), a no-op when the pinned version is there.
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
VERSION=v1.8.0
bin="$(go env GOPATH)/bin/versitygw"
# go version -m reads the module version the binary was built from.
if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -q "mod[[:space:]]*github.com/versity/versitygw[[:space:]]*$VERSION"; then
  exit 0
fi
go install "github.com/versity/versitygw/cmd/versitygw@$VERSION"
