package replica

import (
	"errors"
	"testing"

	"github.com/quirelog/quire/storage"
)

// TestReplicaDeleteRecordsBefore: the leader deletes up to its HW and no
// further, -1 is the HW, a lower offset than the log start changes
// nothing, a follower refuses, and the followers' long polls are woken.
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
	p.updateFollowerLEO(2, 6) // HW 6 of LEO 10
	if hw := p.HighWatermark(); hw != 6 {
		t.Fatalf("hw %d, want 6", hw)
	}
	for _, off := range []int64{7, 10, -2} {
		if start, err := p.DeleteRecordsBefore(off); !errors.Is(err, storage.ErrOffsetOutOfRange) {
			t.Fatalf("delete before %d: start %d, err %v; want ErrOffsetOutOfRange", off, start, err)
		}
	}
	if got := p.LogStartOffset(); got != 0 {
		t.Fatalf("log start %d after refused deletions", got)
	}

	woken := make(chan struct{}, 1)
	p.watchLEO(woken)
	defer p.unwatchLEO(woken)
	start, err := p.DeleteRecordsBefore(3)
	if err != nil || start != 3 {
		t.Fatalf("delete before 3: start %d, %v", start, err)
	}
	select {
	case <-woken:
	default:
		t.Fatal("a follower's long poll was not woken by the new log start")
	}
	if _, _, err := p.Read(2, 1<<20); !errors.Is(err, storage.ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	if res, _, err := p.Read(3, 1<<20); err != nil || len(res.Batches) == 0 {
		t.Fatalf("read at the log start: %d bytes, %v", len(res.Batches), err)
	}
	if start, err := p.DeleteRecordsBefore(1); err != nil || start != 3 {
		t.Fatalf("delete below the log start: start %d, %v; want 3, nil", start, err)
	}
	if start, err := p.DeleteRecordsBefore(-1); err != nil || start != 6 {
		t.Fatalf("delete before the HW (-1): start %d, %v; want 6", start, err)
	}

	if err := rm.makeFollower("t", 0, 2, 2, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	var nle *NotLeaderError
	if _, err := p.DeleteRecordsBefore(6); !errors.As(err, &nle) || nle.Leader != 2 {
		t.Fatalf("a follower deleted records: %v", err)
	}
}
