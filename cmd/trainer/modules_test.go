package main

import (
	"testing"

	"github.com/loaderd/loaderd/client/clienttest"
)

// TestNoDaemonModules keeps the trainer command's module on the client's side of
// the wire: it may bind native libraries (purego) and ask NVML for GPUs
// (go-nvml), but never require the daemon or what only the daemon needs.
func TestNoDaemonModules(t *testing.T) {
	clienttest.ForbidModules(t, clienttest.DaemonModules...)
}
