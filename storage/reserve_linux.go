package storage

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// reserveSpace allocates disk blocks for [off, off+n) of f without
// changing its size. Files that are not the operating system's (the test
// filesystems) cannot.
func reserveSpace(f File, off, n int64) error {
	sc, ok := f.(syscall.Conn)
	if !ok {
		return errors.ErrUnsupported
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, off, n)
			if ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}
