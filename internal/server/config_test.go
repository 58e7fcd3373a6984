package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loaderd/loaderd/client"
)

func TestConfigValidate(t *testing.T) {
	c := Config{Datasets: []string{"a=synthetic", "a=cifar:/x", "nospec"}, Workers: -1, MaxStreams: -2}
	err := c.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{`name "a" used twice`, `"nospec": want name=FORMAT:PATH`, "--workers -1", "--max-streams -2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not report %q", err, want)
		}
	}
	var d Config
	d.EnsureDefaults()
	if err := d.Validate(); err != nil || d.Listen != "127.0.0.1:50051" || d.Datasets[0] != DefaultDataset {
		t.Fatalf("defaults: %+v, %v", d, err)
	}
	bad := Config{Datasets: []string{"x=nosuchformat:/y"}}
	bad.EnsureDefaults()
	if _, err := bad.OpenDatasets(); err == nil || !strings.Contains(err.Error(), "dataset x") {
		t.Fatalf("unknown format: %v", err)
	}
}

// TestRun serves on a Unix socket, streams an epoch, and stops cleanly
// when its context ends, removing the socket.
func TestRun(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "loaderd.sock")
	cfg := Config{Unix: sock, Datasets: []string{"s=synthetic:500"}, Workers: 2, ShutdownTimeout: time.Second}
	cfg.EnsureDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan []string, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler), func(a []string) { ready <- a }) }()
	<-ready
	c, err := client.Dial("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Open(context.Background(), client.StreamConfig{Dataset: "s", BatchSize: 100, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		b, err := s.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(b.Indices)
		b.Release()
	}
	s.Close()
	if n != 500 {
		t.Fatalf("%d images, want 500", n)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after its context ended", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}

// TestConfigValidateSecurity: plaintext TCP is for loopback unless
// --insecure-tcp says otherwise, and the TLS flags come in working sets.
func TestConfigValidateSecurity(t *testing.T) {
	tests := []struct {
		name string
		c    Config
		want []string // parts of the error; none: valid
	}{
		{"loopback plaintext", Config{Listen: "127.0.0.1:50051"}, nil},
		{"loopback 127/8", Config{Listen: "127.3.2.1:50051"}, nil},
		{"loopback ::1", Config{Listen: "[::1]:50051"}, nil},
		{"localhost", Config{Listen: "localhost:50051"}, nil},
		{"loopback tokens", Config{Listen: "127.0.0.1:50051", AuthTokens: "t"}, nil},
		{"unix only", Config{Unix: "/run/l.sock"}, nil},
		{"every interface", Config{Listen: ":50051"}, []string{"--listen :50051 is not a loopback address", "--tls-cert and --tls-key", "--insecure-tcp"}},
		{"0.0.0.0", Config{Listen: "0.0.0.0:50051"}, []string{"--listen 0.0.0.0:50051 is not a loopback"}},
		{"a host name", Config{Listen: "node3:50051"}, []string{"is not a loopback"}},
		{"insecure allowed", Config{Listen: ":50051", InsecureTCP: true}, nil},
		{"insecure tokens", Config{Listen: ":50051", InsecureTCP: true, AuthTokens: "t"}, nil},
		{"tokens in the clear", Config{Listen: "10.0.0.1:50051", AuthTokens: "t"}, []string{"--auth-tokens would send its tokens", "in the clear"}},
		{"TLS", Config{Listen: ":50051", TLSCert: "c", TLSKey: "k"}, nil},
		{"mutual TLS and tokens", Config{Listen: ":50051", TLSCert: "c", TLSKey: "k", TLSClientCA: "ca", AuthTokens: "t"}, nil},
		{"cert without key", Config{Listen: ":50051", TLSCert: "c"}, []string{"--tls-cert needs --tls-key"}},
		{"key without cert", Config{Listen: "127.0.0.1:1", TLSKey: "k"}, []string{"--tls-key needs --tls-cert"}},
		{"client CA without TLS", Config{Listen: "127.0.0.1:1", TLSClientCA: "ca"}, []string{"--tls-client-ca needs --tls-cert"}},
		{"TLS and insecure", Config{Listen: ":1", TLSCert: "c", TLSKey: "k", InsecureTCP: true}, []string{"--insecure-tcp and --tls-cert at once"}},
		{"TLS without TCP", Config{Unix: "/run/l.sock", TLSCert: "c", TLSKey: "k"}, []string{"there is none: give --listen"}},
		{"tokens without TCP", Config{Unix: "/run/l.sock", AuthTokens: "t"}, []string{"there is none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			c.EnsureDefaults()
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

// --metrics-listen without a host binds every interface, and is warned of.
func TestEveryInterface(t *testing.T) {
	for addr, want := range map[string]bool{
		":9090": true, "0.0.0.0:9090": true, "[::]:9090": true,
		"127.0.0.1:9090": false, "localhost:9090": false, "10.0.0.11:9090": false, "[::1]:9090": false, "nonsense": false,
	} {
		if got := everyInterface(addr); got != want {
			t.Errorf("everyInterface(%q) = %v, want %v", addr, got, want)
		}
	}
}
