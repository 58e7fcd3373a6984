package client

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// busyRetry is how long fetchRegion keeps asking a hand-over socket that
// answers busy (others' exchanges fill it: a flood, or many ranks at once).
const busyRetry = 3 * time.Second

// fetchRegion asks the daemon's hand-over socket at path for the region
// token opens, and returns the read-only descriptor it sends with
// SCM_RIGHTS (see ShmRegion.fd_socket in loader.proto). A busy socket is
// asked again, with backoff, for up to busyRetry.
func fetchRegion(path string, token []byte) (*os.File, error) {
	wait, end := 5*time.Millisecond, time.Now().Add(busyRetry)
	for {
		f, busy, err := fetchRegionOnce(path, token)
		if !busy || time.Now().Add(wait).After(end) {
			return f, err
		}
		time.Sleep(wait)
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// fetchRegionOnce is one exchange; busy reports a refusal worth retrying.
func fetchRegionOnce(path string, token []byte) (_ *os.File, busy bool, _ error) {
	fail := func(err error) (*os.File, bool, error) {
		return nil, false, fmt.Errorf("client: shared memory from %s: %w", path, err)
	}
	if len(token) == 0 || len(token) > 255 {
		return fail(fmt.Errorf("token of %d bytes", len(token)))
	}
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	uc.SetDeadline(time.Now().Add(10 * time.Second))
	// A daemon over its caps answers at once and closes without reading:
	// the write may fail, and its answer still waits to be read.
	_, werr := uc.Write(append([]byte{byte(len(token))}, token...))
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(b[:], oob)
	if err != nil || (werr != nil && (n == 0 || b[0] == 0)) {
		if werr != nil {
			return fail(werr)
		}
		return fail(err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	if n == 1 && b[0] == 0 && len(fds) == 1 {
		unix.CloseOnExec(fds[0])
		return os.NewFile(uintptr(fds[0]), "loaderd-region"), false, nil
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	msg, _ := io.ReadAll(io.LimitReader(uc, 4096))
	if len(msg) == 0 {
		msg = []byte("the daemon sent no descriptor")
	}
	f, _, err := fail(fmt.Errorf("%s", msg))
	return f, strings.Contains(string(msg), "hand-over socket busy"), err
}
