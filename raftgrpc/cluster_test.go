package raftgrpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/quirelog/quire/internal/poll"
)

// counterFSM sums the uint64 commands it applies.
// counterFSM sums the distinct values applied (each command carries a
// value once: a command applied again after its leader lost leadership
// mid-commit, which may or may not have committed the first time, counts
// once).
type counterFSM struct {
	mu       sync.Mutex
	seen     map[uint64]bool
	sum      uint64
	n        int
	restores int
}

func (f *counterFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := binary.BigEndian.Uint64(l.Data)
	if f.seen == nil {
		f.seen = map[uint64]bool{}
	}
	if !f.seen[v] {
		f.seen[v] = true
		f.sum += v
		f.n++
	}
	return nil
}

func (f *counterFSM) state() (uint64, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sum, f.n
}

// counterSnap is the distinct values applied.
type counterSnap struct{ values []uint64 }

func (s counterSnap) Persist(sink raft.SnapshotSink) error {
	b := make([]byte, 8*len(s.values))
	for i, v := range s.values {
		binary.BigEndian.PutUint64(b[8*i:], v)
	}
	if _, err := sink.Write(b); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}
func (counterSnap) Release() {}

func (f *counterFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var vs []uint64
	for v := range f.seen {
		vs = append(vs, v)
	}
	return counterSnap{vs}, nil
}

func (f *counterFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if len(b)%8 != 0 {
		return fmt.Errorf("snapshot of %d bytes", len(b))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen, f.sum, f.n = map[uint64]bool{}, 0, 0
	for i := 0; i < len(b); i += 8 {
		v := binary.BigEndian.Uint64(b[i:])
		f.seen[v] = true
		f.sum += v
		f.n++
	}
	f.restores++
	return nil
}

type raftNode struct {
	r   *raft.Raft
	fsm *counterFSM
	tr  *Transport
}

func newRaftNode(t *testing.T, id string, tr *Transport, bootstrap []raft.Server) *raftNode {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(id)
	// The timeouts the metadata quorum's tests use: with 200 ms a node
	// held up by a loaded machine lost the leadership in the middle of the
	// test (docs/testing.md). Leadership is moved by the test itself
	// (LeadershipTransfer, which does not wait for a timeout).
	conf.HeartbeatTimeout = time.Second
	conf.ElectionTimeout = time.Second
	conf.LeaderLeaseTimeout = 500 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.SnapshotThreshold = 50
	conf.TrailingLogs = 10
	conf.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft-" + id, Level: hclog.Warn, Output: io.Discard})
	fsm := &counterFSM{}
	store := raft.NewInmemStore()
	snaps := raft.NewInmemSnapshotStore()
	if bootstrap != nil {
		if err := raft.BootstrapCluster(conf, store, store, snaps, tr, raft.Configuration{Servers: bootstrap}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := raft.NewRaft(conf, fsm, store, store, snaps, tr)
	if err != nil {
		t.Fatal(err)
	}
	n := &raftNode{r: r, fsm: fsm, tr: tr}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	return n
}

func waitLeader(t *testing.T, nodes []*raftNode) *raftNode {
	t.Helper()
	var leader *raftNode
	poll.True(t, "a leader", func() bool {
		for _, n := range nodes {
			if n.r.State() == raft.Leader {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

func waitApplied(t *testing.T, nodes []*raftNode, sum uint64) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("every node at sum %d", sum), func() error {
		for i, n := range nodes {
			if s, c := n.fsm.state(); s != sum {
				return fmt.Errorf("node %d: sum %d after %d commands", i, s, c)
			}
		}
		return nil
	})
}

// onLeader runs op on whichever node leads, again on the new leader when
// the one it ran on lost the leadership meanwhile (an election on a
// loaded machine).
func onLeader(t *testing.T, nodes []*raftNode, what string, op func(*raftNode) error) *raftNode {
	t.Helper()
	var leader *raftNode
	poll.Until(t, what, func() error {
		leader = waitLeader(t, nodes)
		err := op(leader)
		if err != nil && !errors.Is(err, raft.ErrLeadershipLost) && !errors.Is(err, raft.ErrNotLeader) &&
			!errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			t.Fatalf("%s: %v", what, err)
		}
		return err
	})
	return leader
}

// apply commits value v through whichever node leads: a leadership lost
// on the way (raft elections under a loaded machine) is met by applying
// again on the new leader, which the FSM counts once.
func apply(t *testing.T, nodes []*raftNode, v uint64) {
	t.Helper()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := waitLeader(t, nodes).r.Apply(b[:], 5*time.Second).Error()
		if err == nil {
			return
		}
		if !errors.Is(err, raft.ErrLeadershipLost) && !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("apply %d: %v", v, err)
		}
	}
}

// TestTransportRaftCluster runs a real 3-node hashicorp/raft cluster over
// the gRPC transport: election, replication through pipelines, leadership
// transfer (TimeoutNow), and a snapshot installed on a late joiner.
func TestTransportRaftCluster(t *testing.T) {
	t.Parallel()
	trs := []*Transport{startTransport(t), startTransport(t), startTransport(t)}
	var servers []raft.Server
	for i, tr := range trs {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprint(i)), Address: tr.LocalAddr()})
	}
	var nodes []*raftNode
	for i, tr := range trs {
		nodes = append(nodes, newRaftNode(t, fmt.Sprint(i), tr, servers))
	}
	waitLeader(t, nodes)
	var sum uint64
	for i := uint64(1); i <= 100; i++ {
		apply(t, nodes, i)
		sum += i
	}
	waitApplied(t, nodes, sum)

	from := onLeader(t, nodes, "a leadership transfer", func(n *raftNode) error { return n.r.LeadershipTransfer().Error() })
	var others []*raftNode
	for _, n := range nodes {
		if n != from {
			others = append(others, n)
		}
	}
	waitLeader(t, others)
	for i := uint64(101); i <= 200; i++ {
		apply(t, nodes, i)
		sum += i
	}
	waitApplied(t, nodes, sum)

	// A fourth node joins after the log was compacted: it needs a snapshot.
	onLeader(t, nodes, "a snapshot on the leader", func(n *raftNode) error { return n.r.Snapshot().Error() })
	tr4 := startTransport(t)
	n4 := newRaftNode(t, "3", tr4, nil)
	onLeader(t, nodes, "node 3 added as a nonvoter", func(n *raftNode) error {
		return n.r.AddNonvoter("3", tr4.LocalAddr(), 0, 5*time.Second).Error()
	})
	apply(t, nodes, 1000)
	sum += 1000
	waitApplied(t, append(nodes, n4), sum)
	n4.fsm.mu.Lock()
	restores := n4.fsm.restores
	n4.fsm.mu.Unlock()
	if restores == 0 {
		t.Fatal("late joiner replayed the log: expected a snapshot install")
	}
}
