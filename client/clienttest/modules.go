package clienttest

import (
	"os/exec"
	"strings"
	"testing"
)

// DaemonModules are the daemon's module and the dependencies only the
// daemon needs: no module on the client's side of the wire (the client,
// the trainer) may require one. ForbidModules checks it.
var DaemonModules = []string{
	"github.com/loaderd/loaderd", // the daemon's own module (exactly)
	"github.com/apache/arrow-go/",
	"github.com/aws/",
	"github.com/prometheus/",
	"golang.org/x/image",
}

// NativeModules bind native libraries: the trainer needs them for its
// devices (CUDA, NCCL, MPI through purego; NVML through go-nvml), a
// program that links only the client must not.
var NativeModules = []string{
	"github.com/NVIDIA/go-nvml",
	"github.com/ebitengine/purego",
}

// ForbidModules fails the test if the module graph of the module the test
// runs in (go mod graph, in the package's directory, outside any go.work)
// names a module matching one of prefixes; a prefix ending in "/" matches
// a path that starts with it, any other only that path. It is how the
// client's and the trainer's modules keep the daemon out (etcd's
// client/v3 has such a test too).
func ForbidModules(t *testing.T, prefixes ...string) {
	t.Helper()
	cmd := exec.Command("go", "mod", "graph")
	cmd.Env = append(cmd.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod graph: %v", err)
	}
	bad := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		for _, m := range strings.Fields(line) {
			path, _, _ := strings.Cut(m, "@")
			for _, p := range prefixes {
				if path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(path, p) {
					bad[path] = true
				}
			}
		}
	}
	for path := range bad {
		t.Errorf("the module graph names %s, a dependency this module must not have", path)
	}
}
