package proto

// Regenerate the Go code from the .proto files. Paths are relative to this
// directory, which is the proto import root, so the registered file name is
// "loaderd/v1/loader.proto" in Go, Python and every other language.
// protoc, protoc-gen-go and protoc-gen-go-grpc must be on PATH at the
// versions scripts/protogen.sh pins; that script installs them and runs this.
//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative loaderd/v1/loader.proto
