//go:build !unix

package convert

import "os"

// tryLock: no flock here, so no temporary is known to be unused.
func tryLock(string, bool) (*os.File, bool) { return nil, false }

// lockWait: no flock here.
func lockWait(*os.File) error { return nil }
