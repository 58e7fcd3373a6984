//go:build linux

package client

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// A hand-over socket that answers busy (at once, without reading the
// token, as the daemon over its caps does) is asked again, and the
// descriptor it then sends is returned; one that refuses for another
// reason is not.
func TestFetchRegionRetriesBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.fd")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait() // after the listener closes: no goroutine waits in Accept
	defer l.Close()
	f, err := os.CreateTemp(t.TempDir(), "region")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd()) // read here: the server goroutines must not race Close
	replies := []string{"loaderd: hand-over socket busy: too many exchanges at once; retry",
		"loaderd: hand-over socket busy: too many exchanges at once for this user; retry", ""}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, r := range replies {
			c, err := l.AcceptUnix()
			if err != nil {
				return
			}
			if r == "" {
				buf := make([]byte, 256)
				c.Read(buf)
				c.WriteMsgUnix([]byte{0}, unix.UnixRights(fd), nil)
			} else {
				c.Write(append([]byte{1}, r...))
			}
			c.Close()
		}
	}()
	got, err := fetchRegion(path, []byte("token"))
	if err != nil {
		t.Fatalf("after two busy answers: %v", err)
	}
	got.Close()

	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		buf := make([]byte, 256)
		c.Read(buf)
		c.Write(append([]byte{1}, "loaderd: unknown token"...))
		c.Close()
	}()
	if _, err := fetchRegion(path, []byte("token")); err == nil || !strings.Contains(err.Error(), "unknown token") {
		t.Fatalf("a refusal for another reason: %v", err)
	}
}
