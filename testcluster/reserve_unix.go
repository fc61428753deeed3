//go:build unix

package testcluster

import (
	"fmt"
	"net/netip"
	"syscall"
	"time"
)

// reservation keeps a stopped node's address: a socket bound to it but
// not listening, so that no other test's node (clusters start in
// parallel, each port from the kernel) is given the port, while a client
// dialling it is refused at once, as it would be by a stopped process.
// It sets SO_REUSEADDR as Go's listeners do: without it the bind fails
// for as long as connections the node closed first sit in TIME_WAIT on
// the port. A bound socket's port is still skipped when the kernel picks
// one for another listener on port 0 or for an outgoing connection, which
// is what the reservation guards against.
type reservation struct{ fd int }

func reserve(addr string) (*reservation, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("testcluster: reserve %s: not an IPv4 address and port", addr)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("testcluster: reserve %s: %w", addr, err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("testcluster: reserve %s: %w", addr, err)
	}
	sa := &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err = syscall.Bind(fd, sa)
		if err == nil {
			return &reservation{fd: fd}, nil
		}
		if time.Now().After(deadline) {
			_ = syscall.Close(fd)
			return nil, fmt.Errorf("testcluster: reserve %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling for the port, not synchronising with a node
	}
}

func (r *reservation) release() { _ = syscall.Close(r.fd) }
