//go:build unix

package main

import "syscall"

// raiseFDLimit raises the soft limit on open files to the hard limit: each
// waiting request (Prefer: wait) holds a socket, and the usual soft limit
// of 1,024 would stop the listener long before ARBITER_MAX_WAITERS. It
// returns the limit in force afterwards and the one before.
func raiseFDLimit() (now, before uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	before = uint64(rl.Cur)
	if rl.Cur >= rl.Max {
		return before, before, nil
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return before, before, err
	}
	return uint64(rl.Cur), before, nil
}
