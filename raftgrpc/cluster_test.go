package raftgrpc

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// counterFSM sums the uint64 commands it applies.
type counterFSM struct {
	mu       sync.Mutex
	sum      uint64
	n        int
	restores int
}

func (f *counterFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sum += binary.BigEndian.Uint64(l.Data)
	f.n++
	return nil
}

func (f *counterFSM) state() (uint64, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sum, f.n
}

type counterSnap struct {
	sum uint64
	n   int
}

func (s counterSnap) Persist(sink raft.SnapshotSink) error {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], s.sum)
	binary.BigEndian.PutUint64(b[8:], uint64(s.n))
	if _, err := sink.Write(b[:]); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}
func (counterSnap) Release() {}

func (f *counterFSM) Snapshot() (raft.FSMSnapshot, error) {
	sum, n := f.state()
	return counterSnap{sum, n}, nil
}

func (f *counterFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [16]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	f.sum, f.n = binary.BigEndian.Uint64(b[:8]), int(binary.BigEndian.Uint64(b[8:]))
	f.restores++
	f.mu.Unlock()
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
	conf.HeartbeatTimeout = 200 * time.Millisecond
	conf.ElectionTimeout = 200 * time.Millisecond
	conf.LeaderLeaseTimeout = 100 * time.Millisecond
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
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.r.State() == raft.Leader {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no leader elected")
	return nil
}

func waitApplied(t *testing.T, nodes []*raftNode, sum uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ok := true
		for _, n := range nodes {
			if s, _ := n.fsm.state(); s != sum {
				ok = false
			}
		}
		if ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, n := range nodes {
		s, c := n.fsm.state()
		t.Logf("node %d: sum %d after %d commands", i, s, c)
	}
	t.Fatalf("nodes did not all reach sum %d", sum)
}

func apply(t *testing.T, r *raft.Raft, v uint64) {
	t.Helper()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	if err := r.Apply(b[:], 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
}

// TestTransportRaftCluster runs a real 3-node hashicorp/raft cluster over
// the gRPC transport: election, replication through pipelines, leadership
// transfer (TimeoutNow), and a snapshot installed on a late joiner.
func TestTransportRaftCluster(t *testing.T) {
	trs := []*Transport{startTransport(t), startTransport(t), startTransport(t)}
	var servers []raft.Server
	for i, tr := range trs {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprint(i)), Address: tr.LocalAddr()})
	}
	var nodes []*raftNode
	for i, tr := range trs {
		nodes = append(nodes, newRaftNode(t, fmt.Sprint(i), tr, servers))
	}
	leader := waitLeader(t, nodes)
	var sum uint64
	for i := uint64(1); i <= 100; i++ {
		apply(t, leader.r, i)
		sum += i
	}
	waitApplied(t, nodes, sum)

	if err := leader.r.LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	var others []*raftNode
	for _, n := range nodes {
		if n != leader {
			others = append(others, n)
		}
	}
	leader = waitLeader(t, others)
	for i := uint64(1); i <= 100; i++ {
		apply(t, leader.r, i)
		sum += i
	}
	waitApplied(t, nodes, sum)

	// A fourth node joins after the log was compacted: it needs a snapshot.
	if err := leader.r.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	tr4 := startTransport(t)
	n4 := newRaftNode(t, "3", tr4, nil)
	if err := leader.r.AddNonvoter("3", tr4.LocalAddr(), 0, 5*time.Second).Error(); err != nil {
		t.Fatalf("add nonvoter: %v", err)
	}
	apply(t, leader.r, 7)
	sum += 7
	waitApplied(t, append(nodes, n4), sum)
	n4.fsm.mu.Lock()
	restores := n4.fsm.restores
	n4.fsm.mu.Unlock()
	if restores == 0 {
		t.Fatal("late joiner replayed the log: expected a snapshot install")
	}
}
