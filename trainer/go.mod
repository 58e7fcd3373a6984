module github.com/loaderd/loaderd/trainer

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.3-0
	github.com/ebitengine/purego v0.11.3
	github.com/loaderd/loaderd/client v0.0.0
	github.com/loaderd/loaderd/proto v0.0.0
	github.com/loaderd/loaderd/sampler v0.0.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/loaderd/loaderd/pinned v0.0.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/loaderd/loaderd/client => ../client
	github.com/loaderd/loaderd/pinned => ../pinned
	github.com/loaderd/loaderd/proto => ../proto
	github.com/loaderd/loaderd/sampler => ../sampler
)
