package replica

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quirelog/quire/storage"
)

// watchedLogs is the storage manager as the replicas see it (Logs),
// counting the calls made while armed. Its methods are where the storage
// manager's mutex, one for every partition of the data directory, is
// taken; the logs themselves are reached through *storage.Log.
type watchedLogs struct {
	inner Logs
	armed atomic.Bool
	calls atomic.Int32
}

func (w *watchedLogs) note() {
	if w.armed.Load() {
		w.calls.Add(1)
	}
}

func (w *watchedLogs) GetOrCreate(topic string, partition int32, cfg storage.LogConfig) (*storage.Log, error) {
	w.note()
	return w.inner.GetOrCreate(topic, partition, cfg)
}

func (w *watchedLogs) Delete(topic string, partition int32) error {
	w.note()
	return w.inner.Delete(topic, partition)
}

func (w *watchedLogs) Logs() []*storage.Log {
	w.note()
	return w.inner.Logs()
}

func watchedManager(t *testing.T, id int32) (*Manager, *watchedLogs) {
	t.Helper()
	sm, err := storage.OpenManager(t.TempDir(), storage.DefaultLogConfig(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sm.Close() })
	w := &watchedLogs{inner: sm}
	rm, err := New(Config{NodeID: id, Logs: w, Controller: refusingController{}, Brokers: allRegistered{}, Peers: noNetwork{},
		Fetch: FetchConfig{MaxWait: 500 * time.Millisecond, Backoff: time.Hour}, MaxFetchResponseBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rm.Stop)
	rm.setTopicConfig("t", testTopicConfig())
	return rm, w
}

// TestReplicaHWMovesWithoutTheStorageManager: once the replicas are
// hosted, moving the HW (a follower's fetch reaching the leader, through
// HandleFetch as the gRPC service calls it, the acks=all waiter it
// releases, the follower learning the HW) calls nothing of the storage
// manager, so it takes no lock shared by all partitions
// (docs/locking.md). The HW lands in each replica's own log, where the
// checkpoint writer collects it.
func TestReplicaHWMovesWithoutTheStorageManager(t *testing.T) {
	lrm, lw := watchedManager(t, 1)
	frm, fw := watchedManager(t, 2)
	leader := lead(t, lrm, 3, []int32{1, 2}, 5, 3)
	follower := follow(t, frm, 1, 3)
	res, err := leader.appendAsLeader(testBatch(2), -1, 2)
	if err != nil {
		t.Fatal(err)
	}
	acked := make(chan error, 1)
	go func() { acked <- leader.waitHW(context.Background(), res.LeaderEpoch, res.LastOffset, 2) }()

	lw.armed.Store(true)
	fw.armed.Store(true)
	syncUp(t, leader, follower, 2)
	// One more fetch at the log end through the leader's entry point.
	resp, err := lrm.HandleFetch(context.Background(), &FetchRequest{ReplicaID: 2, MaxBytes: 1 << 20, Partitions: []FetchPartition{{
		Topic: "t", CurrentLeaderEpoch: 3, FetchOffset: follower.log.LogEndOffset(), LastFetchedEpoch: follower.lastFetchedEpoch(),
		PartitionMaxBytes: 1 << 20}}})
	if err != nil || resp.Partitions[0].Err != nil {
		t.Fatalf("replica fetch: %v %+v", err, resp)
	}
	fetchOnce(t, leader, follower, 2) // the follower learns the HW
	select {
	case err := <-acked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the acks=all append was not released")
	}
	lw.armed.Store(false)
	fw.armed.Store(false)

	leo := leader.log.LogEndOffset()
	if leo != 10 {
		t.Fatalf("leader log end %d, want 10", leo)
	}
	for name, p := range map[string]*Partition{"leader": leader, "follower": follower} {
		if hw, ok := p.log.HighWatermark(); p.HighWatermark() != leo || !ok || hw != leo {
			t.Errorf("%s: hw %d, in its log %d (%v), want %d", name, p.HighWatermark(), hw, ok, leo)
		}
	}
	if n := lw.calls.Load(); n != 0 {
		t.Errorf("the leader's HW moves called the storage manager %d times", n)
	}
	if n := fw.calls.Load(); n != 0 {
		t.Errorf("the follower's HW moves called the storage manager %d times", n)
	}
}
