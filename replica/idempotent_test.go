package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quirelog/quire/record"
)

func idemTestBatch(n int, id int64, seq int32) []byte {
	b := record.NewBuilder(record.None)
	b.SetProducer(id, 0, seq)
	for i := 0; i < n; i++ {
		b.Append(time.Now().UnixMilli(), nil, []byte("value"), nil)
	}
	return b.Build()
}

// A retry of a batch still waiting for the HW is a duplicate with the
// original's offsets; waiting on it gives the original's outcome: success
// once the HW passes, and NOT_LEADER when the leader loses leadership
// first, never a success for records that may be truncated.
func TestReplicaPartitionDuplicateAwaitsOriginal(t *testing.T) {
	rm := testReplicaManager(t)
	if err := rm.makeLeader("t", 0, 3, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	p, _ := rm.Partition("t", 0)
	orig, err := p.Append(idemTestBatch(3, 7, 0), -1)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := p.Append(idemTestBatch(3, 7, 0), -1)
	if err != nil || !dup.Duplicate || dup.FirstOffset != orig.FirstOffset || dup.LastOffset != orig.LastOffset {
		t.Fatalf("retry: %+v %v, original %+v", dup, err, orig)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := p.AwaitReplicated(short, dup); !errors.Is(err, ErrRequestTimedOut) {
		t.Fatalf("duplicate of an unreplicated batch: %v, want a timeout", err)
	}
	p.updateFollowerLEO(2, orig.LastOffset+1)
	if err := p.AwaitReplicated(ctx, dup); err != nil {
		t.Fatalf("duplicate once the HW passed: %v", err)
	}

	// A second batch, retried while unreplicated; then broker 2 leads.
	next, err := p.Append(idemTestBatch(2, 7, 3), -1)
	if err != nil {
		t.Fatal(err)
	}
	dup2, err := p.Append(idemTestBatch(2, 7, 3), -1)
	if err != nil || !dup2.Duplicate || dup2.LastOffset != next.LastOffset {
		t.Fatalf("retry: %+v %v", dup2, err)
	}
	done := make(chan error, 1)
	go func() { done <- p.AwaitReplicated(ctx, dup2) }()
	if err := rm.makeFollower("t", 0, 2, 4, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	var nl *NotLeaderError
	if err := <-done; !errors.As(err, &nl) {
		t.Fatalf("duplicate after losing leadership: %v, want NotLeaderError", err)
	}
}
