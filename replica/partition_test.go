package replica

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/storage"
)

func testReplicaManager(t *testing.T) *Manager {
	t.Helper()
	return newTestManager(t, 1, nil, nil)
}

// makeLeader leads the replica at epoch with isr as its replicas too.
func (rm *Manager) makeLeader(topic string, p, epoch int32, isr []int32) error {
	return rm.apply(topic, p, Assignment{Leader: rm.nodeID, LeaderEpoch: epoch, Replicas: isr, ISR: isr})
}

// makeFollower follows leader at epoch, with isr as its replicas too.
func (rm *Manager) makeFollower(topic string, p, leader, epoch int32, isr []int32) error {
	return rm.apply(topic, p, Assignment{Leader: leader, LeaderEpoch: epoch, Replicas: isr, ISR: isr})
}

// updateFollowerLEO records a follower's LEO (its fetch offset) as a fetch
// at the current epoch would.
func (p *Partition) updateFollowerLEO(follower int32, leo int64) {
	p.recordFollowerFetch(follower, leo, -1, time.Now(), p.state().leaderEpoch)
}

func testBatch(n int) []byte {
	b := record.NewBuilder(record.None)
	for i := 0; i < n; i++ {
		b.Append(time.Now().UnixMilli(), nil, []byte("value"), nil)
	}
	return b.Build()
}

// TestReplicaPartitionHWFollowsISR checks the replication-ready HW
// rule: HW = min LEO over the ISR, reads stop at the HW, and acks=all
// waiters are released only once the HW passes their batch.
func TestReplicaPartitionHWFollowsISR(t *testing.T) {
	rm := testReplicaManager(t)
	if err := rm.makeLeader("t", 0, 3, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	p, _ := rm.Partition("t", 0)
	info, err := p.appendAsLeader(testBatch(5), -1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 4 || p.HighWatermark() != 0 {
		t.Fatalf("append %+v, hw %d", info, p.HighWatermark())
	}
	res, hw, err := p.Read(0, 1<<20)
	if err != nil || len(res.Batches) != 0 || hw != 0 {
		t.Fatalf("read past the HW: %d bytes, hw %d, %v", len(res.Batches), hw, err)
	}

	acked := make(chan error, 1)
	go func() { acked <- p.waitHW(context.Background(), info.LeaderEpoch, info.LastOffset, 2) }()

	p.updateFollowerLEO(2, 3) // follower has 0..2
	if p.HighWatermark() != 3 {
		t.Fatalf("hw %d, want 3", p.HighWatermark())
	}
	select {
	case err := <-acked:
		t.Fatalf("acks=all released at hw 3 for offset 4: %v", err)
	default:
	}
	p.updateFollowerLEO(2, 5)
	if err := <-acked; err != nil {
		t.Fatal(err)
	}
	if p.HighWatermark() != 5 {
		t.Fatalf("hw %d, want 5", p.HighWatermark())
	}
	p.updateFollowerLEO(2, 4) // the HW never moves back
	if p.HighWatermark() != 5 {
		t.Fatalf("hw moved back to %d", p.HighWatermark())
	}

	// A timeout is REQUEST_TIMED_OUT.
	info, err = p.appendAsLeader(testBatch(1), -1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.waitHW(ctx, info.LeaderEpoch, info.LastOffset, 1); !errors.Is(err, ErrRequestTimedOut) {
		t.Fatalf("want timeout, got %v", err)
	}

	// Too small an ISR for min.insync.replicas: nothing appended.
	if err := rm.makeLeader("t", 0, 4, []int32{1}); err != nil {
		t.Fatal(err)
	}
	leo := p.log.LogEndOffset()
	if _, err := p.appendAsLeader(testBatch(1), -1, 2); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("want not enough replicas, got %v", err)
	}
	if p.log.LogEndOffset() != leo {
		t.Fatalf("appended despite NOT_ENOUGH_REPLICAS")
	}
	// ISR {1} alone: the HW follows the LEO.
	if p.HighWatermark() != leo {
		t.Fatalf("hw %d, leo %d with ISR of one", p.HighWatermark(), leo)
	}

	// A follower refuses appends and wakes waiters with NOT_LEADER.
	if err := rm.makeFollower("t", 0, 2, 5, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	var nle *NotLeaderError
	if _, err := p.appendAsLeader(testBatch(1), 1, 1); !errors.As(err, &nle) || nle.Leader != 2 {
		t.Fatalf("follower append: %v", err)
	}
	if _, err := p.appendAsLeader(testBatch(1), 1, 1); !errors.As(err, &nle) || nle.Leader != 2 || nle.Epoch != 5 {
		t.Fatalf("follower append again: %v", err)
	}
}

// FuzzReplicaAppend feeds outside bytes to the leader's append path: it
// must never panic, and a batch set is appended whole or not at all.
func FuzzReplicaAppend(f *testing.F) {
	f.Add(testBatch(1))
	f.Add(append(testBatch(2), testBatch(3)...))
	f.Add([]byte{})
	f.Add(testBatch(1)[:30])
	sm, err := storage.OpenManager(f.TempDir(), storage.DefaultLogConfig(), storage.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = sm.Close() })
	rm := newManagerOn(f, 1, sm, nil, nil)
	if err := rm.makeLeader("t", 0, 0, []int32{1}); err != nil {
		f.Fatal(err)
	}
	p, _ := rm.Partition("t", 0)
	f.Fuzz(func(t *testing.T, batches []byte) {
		in := append([]byte(nil), batches...)
		before := p.log.LogEndOffset()
		info, err := p.appendAsLeader(in, -1, 1)
		after := p.log.LogEndOffset()
		if err != nil {
			if after != before {
				t.Fatalf("failed append moved the LEO from %d to %d: %v", before, after, err)
			}
			return
		}
		if info.FirstOffset != before || after != info.LastOffset+1 || p.HighWatermark() != after {
			t.Fatalf("append %+v: LEO %d -> %d, HW %d", info, before, after, p.HighWatermark())
		}
	})
}

// An acks=all append waiting for the HW while the ISR shrinks below
// min.insync.replicas is not acknowledged: the HW passes it with fewer
// copies than asked for, which is NOT_ENOUGH_REPLICAS_AFTER_APPEND.
func TestReplicaPartitionAcksAllAfterISRShrink(t *testing.T) {
	rm := testReplicaManager(t)
	if err := rm.makeLeader("t", 0, 3, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	p, _ := rm.Partition("t", 0)
	info, err := p.appendAsLeader(testBatch(5), -1, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.waitHW(ctx, info.LeaderEpoch, info.LastOffset, 2) }()
	// Wait until the waiter is registered, then drop broker 2 from the ISR.
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		n := len(p.waiters)
		p.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("waiter never registered")
		}
		runtime.Gosched()
	}
	if err := rm.makeLeader("t", 0, 3, []int32{1}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("acks=all with min.insync.replicas=2 and ISR %v (hw %d): got %v, want not enough replicas after append",
			p.state().isr, p.HighWatermark(), err)
	}
	// A later wait for the same offset with the ISR still too small fails
	// at once; with min.insync.replicas 1 it succeeds.
	if err := p.waitHW(ctx, info.LeaderEpoch, info.LastOffset, 2); !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("got %v", err)
	}
	if err := p.waitHW(ctx, info.LeaderEpoch, info.LastOffset, 1); err != nil {
		t.Fatal(err)
	}
}
