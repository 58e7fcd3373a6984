// Package integration holds the tests that drive the Go client against a
// daemon the test builds in process, for what only the daemon's own
// packages can set up: a source that blocks on a gate, a Prometheus
// registry to read the daemon's metrics, the loader's view of an image's
// size. It has no code of its own. Tests that need only a running daemon
// live beside the client and start one with client/clienttest.
package integration
