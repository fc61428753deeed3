package testcluster

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// network is the harness's view of the links between nodes. Every
// node-to-node connection is dialled through it (broker.Config.Dialer), so
// it can refuse new connections between partitioned nodes and sever the
// existing ones, in both directions (the far side of a severed connection
// reads EOF).
type network struct {
	mu      sync.Mutex
	byAddr  map[string]int32       // advertised address → node id
	blocked map[[2]int32]bool      // unordered pairs, low id first
	conns   map[*linkConn]struct{} // open node-to-node connections
	dialer  net.Dialer
}

func newNetwork() *network {
	return &network{byAddr: map[string]int32{}, blocked: map[[2]int32]bool{}, conns: map[*linkConn]struct{}{}}
}

func pair(a, b int32) [2]int32 {
	if a > b {
		a, b = b, a
	}
	return [2]int32{a, b}
}

// dial returns node from's dialer.
func (nw *network) dial(from int32) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		nw.mu.Lock()
		to, known := nw.byAddr[addr]
		cut := known && nw.blocked[pair(from, to)]
		nw.mu.Unlock()
		if cut {
			return nil, fmt.Errorf("testcluster: network partition between node %d and node %d", from, to)
		}
		c, err := nw.dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		lc := &linkConn{Conn: c, nw: nw, from: from, to: to}
		nw.mu.Lock()
		defer nw.mu.Unlock()
		if known && nw.blocked[pair(from, to)] { // cut while dialling
			_ = c.Close()
			return nil, fmt.Errorf("testcluster: network partition between node %d and node %d", from, to)
		}
		nw.conns[lc] = struct{}{}
		return lc, nil
	}
}

// cut blocks the links between a and each of others and closes the open
// connections on them.
func (nw *network) cut(a int32, others []int32) {
	nw.mu.Lock()
	var doomed []*linkConn
	for _, b := range others {
		if b != a {
			nw.blocked[pair(a, b)] = true
		}
	}
	for lc := range nw.conns {
		if nw.blocked[pair(lc.from, lc.to)] {
			doomed = append(doomed, lc)
		}
	}
	nw.mu.Unlock()
	for _, lc := range doomed {
		_ = lc.Close()
	}
}

// heal unblocks every link.
func (nw *network) heal() {
	nw.mu.Lock()
	nw.blocked = map[[2]int32]bool{}
	nw.mu.Unlock()
}

// linkConn is one node-to-node connection the network can sever.
type linkConn struct {
	net.Conn
	nw       *network
	from, to int32
	once     sync.Once
}

func (c *linkConn) Close() error {
	var err error
	c.once.Do(func() {
		c.nw.mu.Lock()
		delete(c.nw.conns, c)
		c.nw.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}
