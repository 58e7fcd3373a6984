package client_test

import (
	"testing"

	"github.com/loaderd/loaderd/client/clienttest"
)

// TestNoDaemonModules keeps the client's module free of the daemon and of
// what only the daemon needs: a program that links the client gets gRPC,
// protobuf and x/sys, nothing more.
func TestNoDaemonModules(t *testing.T) {
	clienttest.ForbidModules(t, append(clienttest.DaemonModules, clienttest.NativeModules...)...)
}
