// Package server implements loaderd's gRPC service, loaderd.v1.Loader.
//
// A Server holds the datasets the operator registered, one loader.Pool of
// workers shared by every stream, and a cache of pinned slot pools so a
// reconnecting client does not pay to fault in fresh memory again. Each
// Stream RPC is one loader.Loader: batches go out in order, as inline
// bytes or as references into a shared-memory region, within the window of
// unacknowledged batches the client asked for.
//
// A Server is safe for concurrent use.
package server
