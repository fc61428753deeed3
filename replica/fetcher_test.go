package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/storage"
)

// inProcess is Peers that hands a fetch straight to the leader's Manager,
// as the broker's gRPC ReplicaService would.
type inProcess map[int32]*Manager

func (p inProcess) ReplicaFetch(ctx context.Context, leader int32, req *FetchRequest) (*FetchResponse, error) {
	rm, ok := p[leader]
	if !ok {
		return nil, fmt.Errorf("no broker %d", leader)
	}
	return rm.HandleFetch(ctx, req)
}

func openStorage(t *testing.T) *storage.Manager {
	t.Helper()
	sm, err := storage.OpenManager(t.TempDir(), storage.DefaultLogConfig(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sm.Close() })
	return sm
}

// TestReplicaFetcherFollowsLeader: a follower's fetcher pulls the leader's
// log through Peers and the leader's HandleFetch, an acks=all append is
// acknowledged once it has, and an append to a caught-up partition wakes
// the follower's long poll at once rather than after its max wait.
func TestReplicaFetcherFollowsLeader(t *testing.T) {
	peers := inProcess{}
	// A max wait far above the deadline below, which only tells a woken
	// fetch from one that waited its max wait out.
	fc := FetchConfig{MaxWait: 5 * time.Minute, Backoff: 10 * time.Millisecond, CallTimeoutSlop: 5 * time.Second}
	rm1 := newManagerPeers(t, 1, openStorage(t), nil, nil, peers, fc)
	peers[1] = rm1
	rm2 := newManagerPeers(t, 2, openStorage(t), nil, nil, peers, fc)
	a := Assignment{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if err := rm1.apply("t", 0, a); err != nil {
		t.Fatal(err)
	}
	l, _ := rm1.Partition("t", 0)
	first, err := l.Append(testBatch(3), -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := rm2.apply("t", 0, a); err != nil {
		t.Fatal(err)
	}
	f, _ := rm2.Partition("t", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := l.AwaitReplicated(ctx, first); err != nil {
		t.Fatalf("acks=all: %v", err)
	}
	if f.LogEndOffset() != 3 {
		t.Fatalf("follower at %d once the HW passed offset 2", f.LogEndOffset())
	}
	// Caught up: the follower's fetch is parked at the leader. The next
	// append must reach it well within the 5 min max wait, every time.
	for i := range 5 {
		res, err := l.Append(testBatch(1), -1)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := l.AwaitReplicated(ctx, res); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if took := time.Since(start); took >= time.Minute {
			t.Fatalf("append %d acknowledged after %v: the parked fetch was not woken", i, took)
		}
	}
	poll.True(t, "the follower's HW reaches the leader's", func() bool { return f.HighWatermark() == l.HighWatermark() })
	if !bytes.Equal(logContents(t, l), logContents(t, f)) {
		t.Fatal("follower log differs from the leader's")
	}
}

// TestReplicaHandleFetchRefusals: what the leader refuses of a whole
// fetch, and a partition it does not host answered in its result.
func TestReplicaHandleFetchRefusals(t *testing.T) {
	reg := brokersFunc(func(id int32) (Registration, bool) { return Registration{Incarnation: "b2"}, id == 2 })
	rm := newTestManager(t, 1, nil, reg)
	lead(t, rm, 0, []int32{1, 2}, 5)
	ctx := context.Background()
	part := []FetchPartition{{Topic: "t", FetchOffset: 0, LastFetchedEpoch: -1}}
	for _, tc := range []struct {
		name string
		req  FetchRequest
		want error
	}{
		{"no partitions", FetchRequest{ReplicaID: 2, Incarnation: "b2"}, ErrInvalidRequest},
		{"from itself", FetchRequest{ReplicaID: 1, Incarnation: "b2", Partitions: part}, ErrInvalidRequest},
		{"another incarnation", FetchRequest{ReplicaID: 2, Incarnation: "old", Partitions: part}, ErrStaleBrokerEpoch},
		{"unregistered", FetchRequest{ReplicaID: 3, Incarnation: "b2", Partitions: part}, ErrStaleBrokerEpoch},
		{"negative max wait", FetchRequest{ReplicaID: 2, Incarnation: "b2", MaxWaitMs: -1, Partitions: part}, ErrInvalidRequest},
	} {
		if _, err := rm.HandleFetch(ctx, &tc.req); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	resp, err := rm.HandleFetch(ctx, &FetchRequest{ReplicaID: 2, Incarnation: "b2", MaxWaitMs: 10000,
		Partitions: []FetchPartition{{Topic: "t", FetchOffset: 0, LastFetchedEpoch: -1}, {Topic: "t", Partition: 7, LastFetchedEpoch: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Partitions[1]; !errors.Is(r.Err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unhosted partition: %v", r.Err)
	}
	if r := resp.Partitions[0]; r.Err != nil || len(r.Records) == 0 || r.LogEndOffset != 5 {
		t.Fatalf("hosted partition: err %v, %d bytes, leo %d", r.Err, len(r.Records), r.LogEndOffset)
	}
}

// TestReplicaFetcherLockOrder: a fetcher building its request reads each
// partition's state (Partition.mu) without holding fetcher.mu, as
// docs/locking.md orders them (Partition.mu above fetcher.mu): a goroutine
// that holds a partition's lock while pausing it in the fetcher (the
// documented order) never deadlocks with the request being built. Holding
// fetcher.mu across the partitions' state deadlocked this within a few
// rounds.
func TestReplicaFetcherLockOrder(t *testing.T) {
	rm := newTestManager(t, 1, nil, nil)
	part, _, err := rm.host("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	// A fetcher without its goroutine: this test builds its requests.
	f := &fetcher{m: rm.fetchers, leader: 2, parts: map[*Partition]*followed{}, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	f.set(part, 1)
	const rounds = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range rounds {
			part.mu.Lock()
			f.pause(part, 1) // Partition.mu, then fetcher.mu
			part.mu.Unlock()
		}
	}()
	built := make(chan int)
	go func() {
		n := 0
		for range rounds {
			_, parts, _ := f.request(time.Now().Add(2 * time.Hour)) // past every pause: each is read
			n += len(parts)
		}
		built <- n
	}()
	deadline := time.After(60 * time.Second)
	select {
	case <-done:
	case <-deadline:
		t.Fatal("deadlock: pausing a partition under its lock never got fetcher.mu")
	}
	select {
	case n := <-built:
		if n == 0 {
			t.Fatal("no request named the partition")
		}
	case <-deadline:
		t.Fatal("deadlock: building a request never got the partition's lock")
	}
}

// TestReplicaStatsReplicationBytes: the batch bytes a leader serves its
// follower count in its ReplicationBytesOut, and those the follower's
// fetcher brings in its ReplicationBytesIn; client traffic counts in
// neither.
func TestReplicaStatsReplicationBytes(t *testing.T) {
	peers := inProcess{}
	fc := FetchConfig{MaxWait: 5 * time.Minute, Backoff: 10 * time.Millisecond, CallTimeoutSlop: 5 * time.Second}
	rm1 := newManagerPeers(t, 1, openStorage(t), nil, nil, peers, fc)
	peers[1] = rm1
	rm2 := newManagerPeers(t, 2, openStorage(t), nil, nil, peers, fc)
	a := Assignment{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	for _, rm := range []*Manager{rm1, rm2} {
		if err := rm.apply("t", 0, a); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := rm1.Partition("t", 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var want uint64
	for n := range 3 {
		b := testBatch(n + 1)
		want += uint64(len(b))
		res, err := l.Append(b, -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.AwaitReplicated(ctx, res); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "the replicated bytes counted on both sides", func() error {
		out, in := rm1.Stats().ReplicationBytesOut, rm2.Stats().ReplicationBytesIn
		if out != want || in != want {
			return fmt.Errorf("leader served %d bytes, follower fetched %d; want %d", out, in, want)
		}
		return nil
	})
	if s := rm1.Stats(); s.ReplicationBytesIn != 0 {
		t.Fatalf("the leader fetched %d bytes", s.ReplicationBytesIn)
	}
	if s := rm2.Stats(); s.ReplicationBytesOut != 0 {
		t.Fatalf("the follower served %d bytes", s.ReplicationBytesOut)
	}
}
