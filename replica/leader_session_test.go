package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quirelog/quire/internal/bufpool"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/storage"
)

// sessionLeader is node 1 leading t-0..t-(n-1) at epoch 1 over replicas
// 1..3 with 1 and 2 in sync, each with one batch of one record, and the
// fetch of follower 2, at their log end, in a session.
func sessionLeader(t *testing.T, n int32) (*Manager, []*Partition, *FetchRequest) {
	t.Helper()
	rm := newTestManager(t, 1, nil, nil)
	req := &FetchRequest{ReplicaID: 2, MaxWaitMs: 5000, MinBytes: 1, MaxBytes: 1 << 20, Session: NewLeaderSession()}
	t.Cleanup(req.Session.Close)
	var parts []*Partition
	for i := range n {
		if err := rm.apply("t", i, Assignment{Partition: i, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}); err != nil {
			t.Fatal(err)
		}
		p, _ := rm.Partition("t", i)
		if _, err := p.appendAsLeader(testBatch(1), 1, 1); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
		req.Partitions = append(req.Partitions, FetchPartition{Topic: "t", Partition: i, CurrentLeaderEpoch: 1,
			FetchOffset: 1, LastFetchedEpoch: 1, PartitionMaxBytes: 1 << 20})
	}
	return rm, parts, req
}

// idleFetch is a session's fetch that finds nothing new: it returns once
// the (short) long poll ends.
func idleFetch(t *testing.T, rm *Manager, req *FetchRequest) *FetchResponse {
	t.Helper()
	wait := req.MaxWaitMs
	req.MaxWaitMs = 0
	defer func() { req.MaxWaitMs = wait }()
	resp, err := rm.HandleFetch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// In a session, a partition the follower fetches unchanged is only
// refreshed, not checked in full again; the refresh still counts it as
// caught up, so an idle partition's follower stays in the ISR however long
// nothing is appended.
func TestLeaderSessionRefreshesUnchangedPartitions(t *testing.T) {
	rm, parts, req := sessionLeader(t, 2)
	idleFetch(t, rm, req)
	for i, f := range req.Partitions {
		if f.checked != parts[i] {
			t.Fatalf("partition %d: checked %p after a clean fetch, want %p", i, f.checked, parts[i])
		}
	}
	caughtUp := func(p *Partition) time.Time {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.followers[2].lastCaughtUp
	}
	before := caughtUp(parts[1])
	poll.True(t, "the clock to move", func() bool { return time.Now().After(before) })
	resp := idleFetch(t, rm, req)
	if got := caughtUp(parts[1]); !got.After(before) {
		t.Fatalf("an unchanged fetch left the follower caught up at %v (before: %v)", got, before)
	}
	for i, r := range resp.Partitions {
		if r.Err != nil || r.HighWatermark != 1 || r.LogEndOffset != 1 || len(r.Records) != 0 {
			t.Fatalf("partition %d answered %+v, want no error, HW and LEO 1, no records", i, r)
		}
	}
	parts[1].maybeShrinkISR(caughtUp(parts[1]).Add(time.Second), 2*time.Second)
	if st := parts[1].state(); len(st.isr) != 2 || st.partitionEpoch != 0 {
		t.Fatalf("ISR %v at partition epoch %d after a shrink check within the lag", st.isr, st.partitionEpoch)
	}
}

// An unchanged fetch of an idle partition may skip the refresh for
// idleRefresh, but only while the log end stays where the follower is:
// once the leader appends, the follower's next fetch, unchanged, is
// recorded again (it is no longer caught up as of that log end), however
// soon it comes.
func TestLeaderSessionRefreshesAfterAnAppend(t *testing.T) {
	rm, parts, req := sessionLeader(t, 2)
	idleFetch(t, rm, req) // checked in full
	idleFetch(t, rm, req) // refreshed
	if _, err := parts[1].appendAsLeader(testBatch(1), 1, 1); err != nil {
		t.Fatal(err)
	}
	req.Partitions[1].PartitionMaxBytes = 0 // read nothing: the follower stays at 1
	leaderLEO := func() int64 {
		parts[1].mu.Lock()
		defer parts[1].mu.Unlock()
		return parts[1].followers[2].lastFetchLeaderLEO
	}
	idleFetch(t, rm, req)
	if got := leaderLEO(); got != 2 {
		t.Fatalf("the unchanged fetch after an append recorded the leader's log end as %d, want 2", got)
	}
}

// What was checked before holds only while the partition is led here at
// the epoch fetched: a new epoch, or the replica deleted and hosted again
// (a new Partition), is checked in full and answered as such.
func TestLeaderSessionChecksAgainWhatChanged(t *testing.T) {
	rm, parts, req := sessionLeader(t, 2)
	idleFetch(t, rm, req)

	// t-0 at a new epoch: the follower, still at epoch 1, is fenced.
	if err := rm.apply("t", 0, Assignment{Partition: 0, Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	resp := idleFetch(t, rm, req)
	if err := resp.Partitions[0].Err; !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("unchanged fetch at epoch 1 after a new epoch 2: %v, want %v", err, ErrFencedLeaderEpoch)
	}
	if req.Partitions[0].checked != nil {
		t.Fatal("a refused partition stays checked")
	}
	if resp.Partitions[1].Err != nil {
		t.Fatalf("t-1: %v", resp.Partitions[1].Err)
	}

	// t-1 deleted and hosted again, empty: the follower's log, ahead at
	// epoch 1, diverges from it, which the Partition checked before
	// cannot tell.
	if err := rm.remove("t", 1); err != nil {
		t.Fatal(err)
	}
	if err := rm.apply("t", 1, Assignment{Partition: 1, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	fresh, _ := rm.Partition("t", 1)
	if fresh == parts[1] {
		t.Fatal("the replica hosted again is the same Partition")
	}
	resp = idleFetch(t, rm, req)
	if r := resp.Partitions[1]; r.Err != nil || r.Diverging == nil || *r.Diverging != (EpochEndOffset{Epoch: 1, EndOffset: 0}) {
		t.Fatalf("fetch at 1 of the replica hosted again, empty: error %v, diverging %+v; want diverging at epoch 1, offset 0", r.Err, r.Diverging)
	}
}

// A session's long poll is woken by an append to any of its partitions,
// at its first fetch as at later ones; the session's channel leaves a
// partition the follower stops fetching, and every one when it closes.
func TestLeaderSessionWatchesItsPartitions(t *testing.T) {
	rm, parts, req := sessionLeader(t, 3)
	// A max wait far above the deadline below, which only tells a woken
	// long poll from one that waited its max wait out.
	req.MaxWaitMs = 300000
	idleFetch(t, rm, req)
	waiters := func(p *Partition) int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.leoWaiters)
	}
	for round := range 2 {
		done := make(chan *FetchResponse, 1)
		go func() {
			resp, err := rm.HandleFetch(context.Background(), req)
			if err != nil {
				t.Error(err)
			}
			done <- resp
		}()
		poll.True(t, "the fetch to wait", func() bool { return waiters(parts[2]) == 1 && len(done) == 0 })
		if _, err := parts[2].appendAsLeader(testBatch(1), 1, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case resp := <-done:
			if r := resp.Partitions[2]; len(r.Records) == 0 || r.LogEndOffset != int64(2+round) {
				t.Fatalf("round %d: t-2 answered %d record bytes, LEO %d", round, len(r.Records), r.LogEndOffset)
			}
		case <-time.After(time.Minute):
			t.Fatalf("round %d: an append did not end the session's long poll (max wait 5 min)", round)
		}
		req.Partitions[2] = FetchPartition{Topic: "t", Partition: 2, CurrentLeaderEpoch: 1, FetchOffset: int64(2 + round), LastFetchedEpoch: 1,
			PartitionMaxBytes: 1 << 20}
	}

	req.Partitions = req.Partitions[:2] // t-2 forgotten
	idleFetch(t, rm, req)
	if n := waiters(parts[2]); n != 0 {
		t.Fatalf("a partition the session no longer fetches has %d waiters", n)
	}
	if n := waiters(parts[0]); n != 1 {
		t.Fatalf("a partition of the session has %d waiters, want 1", n)
	}
	req.Session.Close()
	for i, p := range parts {
		if n := waiters(p); n != 0 {
			t.Fatalf("t-%d has %d waiters after the session closed", i, n)
		}
	}
}

// BenchmarkHandleFetchIdle is a follower's fetch of 200 partitions from
// their leader, one with a new batch and the other 199 idle (the follower
// at their log end), as most fetches of a broker with many partitions are:
// on its own, and in a session (the partitions kept from one fetch to the
// next, the one appended to named anew); and in a session of 3,300, a
// leader's share of 10,000 partitions on 3 nodes.
func BenchmarkHandleFetchIdle(b *testing.B) {
	b.Run("alone", func(b *testing.B) { benchHandleFetchIdle(b, false, 200) })
	b.Run("session", func(b *testing.B) { benchHandleFetchIdle(b, true, 200) })
	b.Run("session-3300", func(b *testing.B) { benchHandleFetchIdle(b, true, 3300) })
}

func benchHandleFetchIdle(b *testing.B, session bool, n int32) {
	sm, err := storage.OpenManager(b.TempDir(), storage.DefaultLogConfig(), storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sm.Close() })
	rm, err := New(Config{NodeID: 1, Logs: sm, Controller: refusingController{}, Brokers: allRegistered{}, Peers: noNetwork{},
		Fetch: FetchConfig{MaxWait: 500 * time.Millisecond, Backoff: time.Hour}, MaxFetchResponseBytes: 32 << 20, ReadBuffers: bufpool.Shared})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rm.Stop)
	rm.setTopicConfig("t", testTopicConfig())
	req := &FetchRequest{ReplicaID: 2, MaxWaitMs: 500, MinBytes: 1, MaxBytes: 1 << 20}
	var parts []*Partition
	for i := range n {
		if err := rm.apply("t", i, Assignment{Partition: i, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}); err != nil {
			b.Fatal(err)
		}
		p, _ := rm.Partition("t", i)
		parts = append(parts, p)
		req.Partitions = append(req.Partitions, FetchPartition{Topic: "t", Partition: i, CurrentLeaderEpoch: 1,
			FetchOffset: 0, LastFetchedEpoch: -1, PartitionMaxBytes: 1 << 20})
	}
	if session {
		req.Session = NewLeaderSession()
		defer req.Session.Close()
	}
	ctx := context.Background()
	batch := testBatch(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parts[0].appendAsLeader(batch, 1, 1); err != nil {
			b.Fatal(err)
		}
		resp, err := rm.HandleFetch(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.Partitions[0].Records) == 0 {
			b.Fatal("no records for the partition appended to")
		}
		req.Partitions[0] = FetchPartition{Topic: "t", Partition: 0, CurrentLeaderEpoch: 1,
			FetchOffset: parts[0].log.LogEndOffset(), LastFetchedEpoch: 1, PartitionMaxBytes: 1 << 20}
		if !session {
			for i := range req.Partitions {
				req.Partitions[i].checked = nil
			}
		}
		rm.ReleaseFetch(resp)
	}
}

// A follower out of the ISR whose addition was refused is asked in
// again by the refreshes of its unchanged fetches, once the retry is due,
// as by full checks: an idle partition does not stay under-replicated.
func TestLeaderSessionRefreshAsksForTheISRAgain(t *testing.T) {
	rec := &scriptedRecorder{isrRecorder: isrRecorder{done: make(chan struct{}, 8)}, answers: []error{ErrISRRefused}}
	rm := newTestManager(t, 1, rec, nil)
	if err := rm.apply("t", 0, Assignment{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	p, _ := rm.Partition("t", 0)
	if _, err := p.appendAsLeader(testBatch(1), 1, 1); err != nil {
		t.Fatal(err)
	}
	req := &FetchRequest{ReplicaID: 2, MinBytes: 1, MaxBytes: 1 << 20, Session: NewLeaderSession(),
		Partitions: []FetchPartition{{Topic: "t", CurrentLeaderEpoch: 1, FetchOffset: 1, LastFetchedEpoch: 1, PartitionMaxBytes: 1 << 20}}}
	defer req.Session.Close()
	idleFetch(t, rm, req) // checked in full: asks, refused
	<-rec.done
	if req.Partitions[0].checked != p {
		t.Fatal("the clean fetch was not noted as checked")
	}
	asks := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.asks)
	}
	poll.True(t, "the refused addition asked again", func() bool {
		idleFetch(t, rm, req) // unchanged: refreshed
		return asks() == 2
	})
	poll.True(t, "follower 2 in the ISR", func() bool {
		st := p.state()
		return len(st.isr) == 2
	})
	if req.Partitions[0].checked != p {
		t.Fatal("the partition was checked in full again")
	}
}
