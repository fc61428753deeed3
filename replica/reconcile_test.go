package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/quirelog/quire/storage"
)

// TestReplicaStaleLeadershipBeforeRegistration: a view that names this
// broker leader but predates its registration by this process (it was
// leader in a previous life, replayed from the metadata log before the
// controller saw it come back) must not make it lead: it would append at
// an epoch whose history the other replicas hold differently and answer a
// stale high watermark. Once the view includes the registration, it leads.
func TestReplicaStaleLeadershipBeforeRegistration(t *testing.T) {
	rm := newTestManager(t, 1, nil, nil)
	view := func(registered bool, epoch int32) View {
		return View{Registered: registered, Topics: []TopicView{{Name: "t", ID: "id-t", Config: testTopicConfig(),
			Partitions: []Assignment{{Partition: 0, Leader: 1, LeaderEpoch: epoch, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}}}}}
	}
	rm.Reconcile(view(false, 3))
	part, ok := rm.Partition("t", 0)
	if !ok {
		t.Fatal("replica not hosted")
	}
	if st := part.state(); st.leader {
		t.Fatalf("leads at epoch %d before registering", st.leaderEpoch)
	}
	if _, err := part.Append(testBatch(1), 1); !errors.Is(err, ErrLeaderNotAvailable) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append before registering: %v, want not leader", err)
	}
	rm.Reconcile(view(true, 4))
	if st := part.state(); !st.leader || st.leaderEpoch != 4 {
		t.Fatalf("after registering: leader %v at epoch %d, want leader at 4", st.leader, st.leaderEpoch)
	}
	if _, err := part.Append(testBatch(1), 1); err != nil {
		t.Fatalf("append as leader: %v", err)
	}
}

// TestReplicaNewLeaderHighWatermarkEstablished: a follower elected leader
// starts from the HW it followed, which lags its log end (the records the
// old leader had not yet told it were committed). Until a follower's fetch
// moves the HW past the start of the new epoch, its HW is not established
// and must not be answered as the latest offset (it would go backwards);
// once it is, it is.
func TestReplicaNewLeaderHighWatermarkEstablished(t *testing.T) {
	rm1, rm2 := replicaOn(t, 1), replicaOn(t, 2)
	old := lead(t, rm1, 1, []int32{1, 2}, 3, 2)
	next := follow(t, rm2, 1, 1)
	fetchOnce(t, old, next, 2) // copies 5 records; next's HW is still 0
	if !old.HighWatermarkEstablished() {
		t.Fatal("the old leader's HW not established")
	}
	if hw := next.HighWatermark(); hw != 0 {
		t.Fatalf("follower HW %d before its next fetch, want 0", hw)
	}
	// The old leader goes; node 2 leads at epoch 2 with ISR {2, 3}.
	if err := rm2.apply("t", 0, Assignment{Leader: 2, LeaderEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}}); err != nil {
		t.Fatal(err)
	}
	if next.HighWatermarkEstablished() {
		t.Fatalf("a new leader with HW %d below its epoch start 5 says its HW is established", next.HighWatermark())
	}
	rm3 := replicaOn(t, 3)
	f3 := follow(t, rm3, 2, 2)
	fetchOnce(t, next, f3, 3) // node 3 copies everything
	fetchOnce(t, next, f3, 3) // and its next fetch says so
	if hw := next.HighWatermark(); hw != 5 || !next.HighWatermarkEstablished() {
		t.Fatalf("after the ISR caught up: HW %d, established %v; want 5, true", hw, next.HighWatermarkEstablished())
	}
}

// manyView is a registered view of topic t with n partitions, those of
// an even number led by node 1 and the others by node 2, all at epoch.
func manyView(n int, epoch int32) View {
	parts := make([]Assignment, n)
	for i := range parts {
		leader := int32(1 + i%2)
		parts[i] = Assignment{Partition: int32(i), Leader: leader, LeaderEpoch: epoch, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	}
	return View{Registered: true, Topics: []TopicView{{Name: "t", ID: "id-t", Config: testTopicConfig(), Partitions: parts}}}
}

// TestReplicaReconcileManyPartitions: a view changing more partitions
// than Reconcile applies one by one (they go to several at once) leaves
// every one in the state the view gives it: led here at the view's epoch,
// its epoch recorded in the log, or followed.
func TestReplicaReconcileManyPartitions(t *testing.T) {
	t.Parallel()
	const n = 160 // over reconcileWorkers
	rm := newTestManager(t, 1, nil, nil)
	for _, epoch := range []int32{1, 2} {
		rm.Reconcile(manyView(n, epoch))
		for i := range n {
			part, ok := rm.Partition("t", int32(i))
			if !ok {
				t.Fatalf("epoch %d: partition %d not hosted", epoch, i)
			}
			st := part.state()
			if st.leaderEpoch != epoch || st.leader != (i%2 == 0) {
				t.Fatalf("epoch %d: partition %d leader %v at epoch %d", epoch, i, st.leader, st.leaderEpoch)
			}
			if st.leader {
				if e, _ := part.log.EndOffsetForEpoch(epoch); e != epoch {
					t.Fatalf("epoch %d: partition %d's log knows epoch %d", epoch, i, e)
				}
			}
		}
	}
}

// BenchmarkReconcileNewEpochs: a view giving every one of
// QUIRE_BENCH_PARTITIONS partitions (default 2,000) led here a new
// epoch, as the image does when a restarted node is unfenced; each leader
// records its epoch in its log's epoch cache (in memory: the checkpoint
// file is written before the epoch's first record).
func BenchmarkReconcileNewEpochs(b *testing.B) {
	n := 2000
	if s := os.Getenv("QUIRE_BENCH_PARTITIONS"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			n = v
		}
	}
	sm, err := storage.OpenManager(b.TempDir(), storage.DefaultLogConfig(), storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sm.Close() })
	rm := newManagerOn(b, 1, sm, nil, nil)
	view := func(epoch int32) View {
		v := manyView(n, epoch)
		for i := range v.Topics[0].Partitions {
			v.Topics[0].Partitions[i].Leader = 1
		}
		return v
	}
	rm.Reconcile(view(1))
	b.ResetTimer()
	for i := range b.N {
		rm.Reconcile(view(int32(i + 2)))
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/partition")
}

// TestReplicaReconcileWritesEpochCheckpoints: a view giving many
// partitions a new epoch here records it in memory at election, and the
// background pass after it writes each leader's checkpoint file, so that
// the first append to each does not.
func TestReplicaReconcileWritesEpochCheckpoints(t *testing.T) {
	t.Parallel()
	const n = 80 // over reconcileWorkers
	dir := t.TempDir()
	sm, err := storage.OpenManager(dir, storage.DefaultLogConfig(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sm.Close() })
	rm := newManagerOn(t, 1, sm, nil, nil)
	rm.Reconcile(manyView(n, 3))
	rm.bg.Wait()
	for i := 0; i < n; i += 2 { // led here
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("t-%d", i), storage.LeaderEpochCheckpointFile))
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != "0\n1\n3 0\n" {
			t.Fatalf("partition %d's checkpoint %q, want epoch 3 from 0", i, data)
		}
	}
}
