// Package clienttest implements what the tests and benchmarks of programs
// that link the client need: a real loaderd daemon to talk to, as
// net/http/httptest gives an HTTP server (a separate process serving on a
// Unix socket in a temporary directory, stopped when the test ends); the
// check that keeps a module's graph free of the daemon's dependencies
// (ForbidModules); the process's CPU time, for figures per image; and
// certificates made at run time for TLS tests (NewCA).
//
// The daemon is a separate binary, so a test that uses this package links
// nothing of the daemon: the client's and the trainer's modules stay free
// of its dependencies. The binary is $LOADERD_BIN when set; else, inside a
// loaderd checkout, it is built once per test process from the checkout's
// cmd/loaderd (go build, so the build cache makes it quick after the
// first time); else it is the loaderd on $PATH. Without any, Start fails
// the test with a message saying which to provide.
//
// Its functions are safe for concurrent use; each Start gets its own
// daemon.
package clienttest
