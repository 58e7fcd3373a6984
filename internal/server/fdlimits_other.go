//go:build !linux

package server

import (
	"net"
	"syscall"
)

// raiseOpenFileLimit returns the RLIMIT_NOFILE limits the daemon runs
// under. Outside Linux it leaves them as they are (Go's runtime already
// raises the soft limit where the system allows).
func raiseOpenFileLimit() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	return uint64(rl.Cur), uint64(rl.Max), nil
}

// peerUID: the peer's user is not looked up outside Linux, so only the
// hand-over socket's overall cap applies there.
func peerUID(*net.UnixConn) (uid uint32, ok bool) { return 0, false }
