package replica

import (
	"errors"
	"testing"
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
