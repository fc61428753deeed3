//go:build unix

package testcluster

import (
	"net"
	"testing"
	"time"
)

// TestReserveAfterServerClosedConnections: a node that closes its
// accepted connections first (as Kill does) leaves them in TIME_WAIT on
// its own port; the reservation must still take the port, refuse dials
// while held, and let the node listen again once released.
func TestReserveAfterServerClosedConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	client, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	_ = server.Close() // the server closes first: TIME_WAIT on addr
	buf := make([]byte, 1)
	_ = client.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := client.Read(buf); err == nil {
		t.Fatal("read from a closed connection succeeded")
	}
	_ = client.Close()
	_ = l.Close()

	r, err := reserve(addr)
	if err != nil {
		t.Fatalf("reserve with a TIME_WAIT connection on the port: %v", err)
	}
	if c, err := net.DialTimeout("tcp", addr, 30*time.Second); err == nil {
		_ = c.Close()
		t.Fatal("a dial to a reserved address was accepted")
	}
	r.release()
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen after release: %v", err)
	}
	_ = l2.Close()
}
