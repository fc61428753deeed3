package request_test

import (
	"testing"
	"time"

	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/storage"
)

// sessionCluster is cluster with a live session with the controller: its
// deadline an hour away.
type sessionCluster struct{ cluster }

func (sessionCluster) SessionDeadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }

// An acks=all produce waiting for a follower is answered as soon as the
// leadership moves away (NOT_LEADER_OR_FOLLOWER, the outcome unknown),
// not at the end of its timeout: the client then looks for the new
// leader. The timeout here is past the test's deadline, so a wait that
// ignored the move would fail the test.
func TestCoreAcksAllAnsweredWhenLeadershipMoves(t *testing.T) {
	t.Parallel()
	sm, err := storage.OpenManager(t.TempDir(), storage.DefaultLogConfig(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sm.Close() })
	rm, err := replica.New(replica.Config{NodeID: self, Logs: sm, Controller: noController{}, Brokers: allRegistered{}, Peers: noPeers{},
		Fetch: replica.FetchConfig{MaxWait: 500 * time.Millisecond, Backoff: time.Hour}, MaxFetchResponseBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rm.Stop)
	view := func(leader, epoch int32) replica.View {
		return replica.View{Registered: true, Topics: []replica.TopicView{{Name: "t", ID: "id-t",
			Config: replica.TopicConfig{Log: storage.DefaultLogConfig(), MinInsyncReplicas: 1},
			Partitions: []replica.Assignment{{Partition: 0, Leader: leader, LeaderEpoch: epoch, PartitionEpoch: epoch,
				Replicas: []int32{self, 2}, ISR: []int32{self, 2}}}}}}
	}
	rm.Reconcile(view(self, 1)) // follower 2 never fetches: the HW stays at 0
	c, err := request.New(request.Config{NodeID: self, Replicas: rm, Cluster: sessionCluster{}, Codes: codes})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	type answer struct {
		out []request.ProduceResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		out, err := c.Produce(ctx, &request.ProduceRequest{Acks: -1, Timeout: time.Hour,
			Partitions: []request.ProducePartition{{Topic: "t", Partition: 0, Records: batch(1)}}})
		done <- answer{out, err}
	}()
	part, _ := rm.Partition("t", 0)
	poll.True(t, "the produce appended", func() bool { return part.LogEndOffset() == 1 })
	select {
	case a := <-done:
		t.Fatalf("answered before the leadership moved: %v %+v", a.err, a.out)
	default:
	}
	rm.Reconcile(view(2, 2))
	select {
	case a := <-done:
		if a.err != nil || len(a.out) != 1 || code(t, a.out[0].Err) != 6 {
			t.Fatalf("after the leadership moved: %v %+v, want NOT_LEADER_OR_FOLLOWER", a.err, a.out)
		}
	case <-ctx.Done():
		t.Fatal("the acks=all produce was still waiting after the leadership moved away")
	}
}
