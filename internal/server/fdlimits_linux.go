package server

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// raiseOpenFileLimit lifts the soft RLIMIT_NOFILE to the hard one, so a
// flood of connections meets the largest limit the daemon may have, and
// returns the limits it runs under.
func raiseOpenFileLimit() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	if rl.Cur < rl.Max {
		raised := syscall.Rlimit{Cur: rl.Max, Max: rl.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return rl.Cur, rl.Max, err
		}
		rl = raised
	}
	return rl.Cur, rl.Max, nil
}

// peerUID is the user of the process that connected c (SO_PEERCRED).
func peerUID(c *net.UnixConn) (uid uint32, ok bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || gerr != nil {
		return 0, false
	}
	return cred.Uid, true
}
