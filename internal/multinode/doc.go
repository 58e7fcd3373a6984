// Package multinode holds the test that plays a multi-node job on one
// machine: two daemons (two nodes), each with its own socket and shard
// cache, and four torchrun-style ranks that find their node's daemon and
// their DistributedSampler slice from RANK, WORLD_SIZE, LOCAL_RANK and
// LOCAL_WORLD_SIZE (docs/DEPLOY.md). It has no API.
package multinode
