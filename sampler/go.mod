module github.com/loaderd/loaderd/sampler

go 1.26.8
