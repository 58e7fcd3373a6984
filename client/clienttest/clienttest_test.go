package clienttest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/client/clienttest"
)

// TestStartStop starts a daemon with two datasets, lists them through the
// client, and stops it cleanly; the socket's directory goes with it.
func TestStartStop(t *testing.T) {
	d := clienttest.Start(t, "--dataset", "train=synthetic:64", "--dataset", "val=synthetic:16?seed=3")
	ds, err := d.Dial(t).Datasets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range ds {
		names = append(names, fmt.Sprintf("%s=%d", x.GetName(), x.GetSize()))
	}
	if got := strings.Join(names, " "); got != "train=64 val=16" {
		t.Fatalf("datasets %q", got)
	}
	if err := d.Stop(); err != nil {
		t.Fatalf("Stop: %v\n%s", err, d.Log())
	}
	if err := d.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// TestBadFlags gets the daemon's own error when it refuses to start.
func TestBadFlags(t *testing.T) {
	_, err := clienttest.New(clienttest.BinaryFor(t), "--dataset", "train=nosuchformat:x")
	if err == nil || !strings.Contains(err.Error(), "nosuchformat") {
		t.Fatalf("New with an unknown format: %v", err)
	}
}

// TestKill stops a daemon as a crash would; Stop afterwards reports it.
func TestKill(t *testing.T) {
	d := clienttest.Start(t, "--dataset", "train=synthetic:8")
	d.Kill()
	if err := d.Stop(); err == nil {
		t.Fatal("Stop after Kill reported a clean exit")
	}
}
