package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// grpcurlPath finds grpcurl on PATH or in GOPATH/bin, where scripts/test.sh
// installs it.
func grpcurlPath(t *testing.T) string {
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "grpcurl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("grpcurl not found: scripts/test.sh installs it (go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4)")
	return ""
}

// TestGrpcurl drives the daemon with a real outside client: reflection
// lists the services, health answers SERVING, and ListDatasets works.
func TestGrpcurl(t *testing.T) {
	grpcurl := grpcurlPath(t)
	_, addr := startServer(t, "127.0.0.1:0", 100)
	tests := []struct {
		flags, rest []string // grpcurl [flags] ADDR [rest]
		want        []string
	}{
		{nil, []string{"list"}, []string{"loaderd.v1.Loader", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"}},
		{nil, []string{"describe", "loaderd.v1.Loader"}, []string{"rpc Stream ( stream .loaderd.v1.StreamRequest ) returns ( stream .loaderd.v1.StreamReply )"}},
		{[]string{"-d", `{"service":"loaderd.v1.Loader"}`}, []string{"grpc.health.v1.Health/Check"}, []string{`"status": "SERVING"`}},
		{nil, []string{"loaderd.v1.Loader/ListDatasets"}, []string{`"name": "synth"`, `"size": "100"`}},
	}
	for _, tt := range tests {
		args := append(append(append([]string{"-plaintext"}, tt.flags...), addr), tt.rest...)
		out, err := exec.Command(grpcurl, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("grpcurl %s: output lacks %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
	}
}
