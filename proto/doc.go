// Package proto implements nothing at run time: it holds loaderd's wire
// protocol as .proto sources (loaderd/v1/loader.proto) and the go:generate
// directive that turns them into Go. The generated code lives in package
// loaderdv1 (import "github.com/loaderd/loaderd/proto/loaderd/v1").
//
// Regenerate with scripts/protogen.sh, or with go generate ./proto/... when
// protoc and the plugins are already installed at the pinned versions.
package proto
