package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/storage"
)

// TestReplicaDeleteRecordsBefore: the leader deletes up to its HW and no
// further, -1 is the HW, and it answers once every in-sync follower's log
// start (as its fetches say) is there too, with the lowest over the ISR;
// until then a deadline is ErrRequestTimedOut, the leader's records gone
// all the same. A follower refuses.
func TestReplicaDeleteRecordsBefore(t *testing.T) {
	rm := testReplicaManager(t)
	if err := rm.makeLeader("t", 0, 1, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	p, _ := rm.Partition("t", 0)
	for range 2 {
		if _, err := p.appendAsLeader(testBatch(5), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	follower := func(leo, logStart int64) { p.recordFollowerFetch(2, leo, logStart, time.Now(), 1) }
	follower(6, 0) // HW 6 of LEO 10
	if hw := p.HighWatermark(); hw != 6 {
		t.Fatalf("hw %d, want 6", hw)
	}
	ctx := context.Background()
	for _, off := range []int64{7, 10, -2} {
		if start, err := p.DeleteRecordsBefore(ctx, off); !errors.Is(err, storage.ErrOffsetOutOfRange) {
			t.Fatalf("delete before %d: start %d, err %v; want ErrOffsetOutOfRange", off, start, err)
		}
	}
	if got := p.LogStartOffset(); got != 0 {
		t.Fatalf("log start %d after refused deletions", got)
	}

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.DeleteRecordsBefore(short, 3); !errors.Is(err, ErrRequestTimedOut) {
		t.Fatalf("delete before 3, the follower's log start still 0: %v, want ErrRequestTimedOut", err)
	}
	if got := p.LogStartOffset(); got != 3 {
		t.Fatalf("the leader's log start %d after a deletion that timed out, want 3", got)
	}
	if _, _, err := p.Read(2, 1<<20); !errors.Is(err, storage.ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}

	done := make(chan error, 1)
	var low int64
	go func() {
		var err error
		low, err = p.DeleteRecordsBefore(ctx, -1) // the HW, 6
		done <- err
	}()
	follower(6, 3)
	select {
	case err := <-done:
		t.Fatalf("answered (%d, %v) with the follower's log start at 3", low, err)
	case <-time.After(20 * time.Millisecond):
	}
	follower(6, 6)
	if err := <-done; err != nil || low != 6 {
		t.Fatalf("delete before the HW (-1): low watermark %d, %v; want 6", low, err)
	}
	if low, err := p.DeleteRecordsBefore(ctx, 1); err != nil || low != 6 {
		t.Fatalf("delete below the log start: low watermark %d, %v; want 6, nil", low, err)
	}

	if err := rm.makeFollower("t", 0, 2, 2, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	var nle *NotLeaderError
	if _, err := p.DeleteRecordsBefore(ctx, 6); !errors.As(err, &nle) || nle.Leader != 2 {
		t.Fatalf("a follower deleted records: %v", err)
	}
}

// A follower in a long poll whose log start is below the leader's is
// answered at once when a DeleteRecords moves it, not at the end of the
// poll; one that does not say its log start waits the poll out.
func TestReplicaLongPollEndsAtANewLogStart(t *testing.T) {
	rm, parts, req := sessionLeader(t, 1)
	req.Session = nil
	req.MaxWaitMs = 60_000
	req.Partitions[0].LogStartOffset = 0
	p := parts[0]
	p.recordFollowerFetch(2, 1, 0, time.Now(), 1) // HW 1
	answered := make(chan *FetchResponse, 1)
	go func() {
		resp, err := rm.HandleFetch(context.Background(), req)
		if err != nil {
			t.Error(err)
		}
		answered <- resp
	}()
	poll.True(t, "the long poll to start", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.leoWaiters) > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.DeleteRecordsBefore(ctx, 1); !errors.Is(err, ErrRequestTimedOut) {
		t.Fatalf("delete before 1: %v, want ErrRequestTimedOut (the follower has not fetched again)", err)
	}
	select {
	case resp := <-answered:
		if r := resp.Partitions[0]; r.LogStartOffset != 1 {
			t.Fatalf("answered log start %d, want 1", r.LogStartOffset)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll did not end at the new log start")
	}
	if !startsAhead(req, []*Partition{p}) {
		t.Fatal("a follower at log start 0 is not behind the leader's 1")
	}
	req.Partitions[0].LogStartOffset = -1
	if startsAhead(req, []*Partition{p}) {
		t.Fatal("a follower that did not say its log start counts as behind")
	}
}
