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
		apply(t, nodes, i)
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
	for i := uint64(101); i <= 200; i++ {
		apply(t, nodes, i)
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
