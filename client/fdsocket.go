package client

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fetchRegion asks the daemon's hand-over socket at path for the region
// token opens, and returns the read-only descriptor it sends with
// SCM_RIGHTS (see ShmRegion.fd_socket in loader.proto).
func fetchRegion(path string, token []byte) (*os.File, error) {
	fail := func(err error) (*os.File, error) {
		return nil, fmt.Errorf("client: shared memory from %s: %w", path, err)
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
	if _, err := uc.Write(append([]byte{byte(len(token))}, token...)); err != nil {
		return fail(err)
	}
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(b[:], oob)
	if err != nil {
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
		return os.NewFile(uintptr(fds[0]), "loaderd-region"), nil
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	msg, _ := io.ReadAll(io.LimitReader(uc, 4096))
	if len(msg) == 0 {
		msg = []byte("the daemon sent no descriptor")
	}
	return fail(fmt.Errorf("%s", msg))
}
