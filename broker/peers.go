package broker

// Node-to-node connections: one cached gRPC connection per peer address,
// dialled through Config.Dialer, for replication (replica.Peers), routing
// (route.go) and describing logs (describe.go).

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"github.com/quirelog/quire/internal/bufpool"
	"github.com/quirelog/quire/replica"
)

// ReplicaFetch sends a follower's fetch to the broker leader
// (replica.Peers), over the node-to-node connection to it.
func (c *cluster) ReplicaFetch(ctx context.Context, leader int32, req *replica.FetchRequest) (*replica.FetchResponse, error) {
	addr, ok := c.brokerAddr(leader)
	if !ok {
		return nil, fmt.Errorf("broker: leader %d has no address", leader)
	}
	cc, err := c.peer(addr)
	if err != nil {
		return nil, err
	}
	// A response may hold replica.fetch.response.max.bytes and more (at
	// least one batch): far above gRPC's default 4 MiB receive limit
	// (replicaWire takes up to request.MaxSendBytes).
	return replicaWire.Fetch(ctx, cc, req)
}

// OpenFetchSession opens a follower's session with a leader broker
// (replica.SessionPeers): one ReplicaFetchStream, opened by the first
// fetch, and unary fetches while the leader lacks the stream.
func (c *cluster) OpenFetchSession(leader int32) replica.FetchSession {
	return replicaWire.OpenSession(leader, func() (string, bool) { return c.brokerAddr(leader) }, c.peer, c.ReplicaFetch)
}

// brokerAddr is where broker id listens, as registered.
func (c *cluster) brokerAddr(id int32) (string, bool) {
	b, ok := c.node.Image().Broker(id)
	if !ok || b.Addr == "" {
		return "", false
	}
	return b.Addr, true
}

// dial connects to another node; the Forwarder caches and closes the
// connections.
func (c *cluster) dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, c.dialOptions()...)
}

// dialOptions are those of every node-to-node connection: Config.Dialer
// when set, and a reconnect backoff capped at half a second (gRPC's
// default grows to two minutes), so that a peer back after a crash or a
// network partition is reached again within about that: a follower's
// fetch waits on the reconnect (ReplicaFetch), and a raft peer's within
// an election.
func (c *cluster) dialOptions() []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(c.creds),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: 2 * time.Second,
		}),
		// A peer cut off or paused is found within about four seconds,
		// idle or not, and its connection replaced, instead of waiting
		// on TCP retransmission after the network heals (servers accept
		// pings once a second). A ping gets 3 s: with 1 s, a node
		// starved of CPU for a second (a loaded machine, a long GC)
		// had its healthy connections closed, and with them the raft
		// calls on them, which cost the controller its lease.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: time.Second, Timeout: 3 * time.Second, PermitWithoutStream: true}),
		// Flow-control windows, socket buffers and a buffer pool for
		// megabyte replica fetch answers, as on the listener
		// (transportOptions): with gRPC's 64 KiB default window the
		// leader sends a 1 MiB answer in window-sized pieces, each
		// waiting for the follower's window update.
		grpc.WithInitialWindowSize(4 << 20),
		grpc.WithInitialConnWindowSize(16 << 20),
		grpc.WithReadBufferSize(256 << 10),
		grpc.WithWriteBufferSize(256 << 10),
		experimental.WithBufferPool(bufpool.Shared),
	}
	if d := c.cfg.Dialer; d != nil {
		opts = append(opts, grpc.WithContextDialer(d))
	}
	return opts
}

// peer returns the cached node-to-node connection to addr (dialled with
// dialOptions, so Config.Dialer applies), opening it on first use. They
// are closed by close.
func (c *cluster) peer(addr string) (*grpc.ClientConn, error) {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	if c.peersClosed {
		return nil, ErrShuttingDown
	}
	if cc, ok := c.peers[addr]; ok {
		return cc, nil
	}
	cc, err := c.dial(addr)
	if err != nil {
		return nil, fmt.Errorf("broker: dial %s: %w", addr, err)
	}
	if c.peers == nil {
		c.peers = map[string]*grpc.ClientConn{}
	}
	c.peers[addr] = cc
	return cc, nil
}

// closePeers closes the connections peer opened.
func (c *cluster) closePeers() error {
	c.peersMu.Lock()
	peers := c.peers
	c.peers, c.peersClosed = nil, true
	c.peersMu.Unlock()
	var first error
	for _, cc := range peers {
		if err := cc.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
