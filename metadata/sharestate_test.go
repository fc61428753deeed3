package metadata

import (
	"errors"
	"reflect"
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
)

func putShareStates(broker int32, states ...ShareState) *pb.Command {
	c := &pb.PutShareStates{BrokerId: broker}
	for _, s := range states {
		c.States = append(c.States, ShareStateToPB(s))
	}
	return &pb.Command{Cmd: &pb.Command_PutShareStates{PutShareStates: c}}
}

func shareState(group string, partition, epoch int32, start int64, runs ...ShareRun) ShareState {
	return ShareState{ShareKey: ShareKey{Group: group, Topic: "t", Partition: partition}, TopicID: "id-t", LeaderEpoch: epoch,
		Start: start, Runs: runs}
}

const (
	runAcquired     = 1
	runAcknowledged = 2
	runArchived     = 3
)

// TestFSMPutShareStates: a share-partition's state is stored only from
// the partition's leader at its leader epoch, in the topic incarnation it
// names, each state of a command on its own; it is refused below its
// metadata.version, survives a reopen and a snapshot, and goes with its
// topic.
func TestFSMPutShareStates(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	epochs := tf.threeBrokersAt(SupportedMetadataVersions())
	tf.ok(createTopic("t", []int32{1, 2, 3}, []int32{2, 3, 1}))
	runs := []ShareRun{{Length: 2, State: runAcknowledged}, {Length: 1, State: runAcquired, DeliveryCount: 3}}
	s0 := shareState("g", 0, 0, 10, runs...)
	tf.rejected(putShareStates(1, s0), ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionShareState))

	res := tf.ok(putShareStates(1, s0, shareState("g", 1, 0, 5), shareState("g", 0, 1, 11))).(ShareStateResults)
	if res[0] != nil || !errors.Is(res[1], ErrShareStateFenced) || !errors.Is(res[2], ErrShareStateFenced) {
		t.Fatalf("results %v: want stored, then refused (not the leader of 1), refused (epoch 1 of 0)", res)
	}
	got, ok := tf.f.Image().ShareState(s0.ShareKey)
	if !ok || !reflect.DeepEqual(got, s0) {
		t.Fatalf("stored %+v %v, want %+v", got, ok, s0)
	}
	if _, ok := tf.f.Image().ShareState(ShareKey{"g", "t", 1}); ok {
		t.Fatal("a refused state was stored")
	}
	// Another topic incarnation, an unknown partition, a bad group.
	other := s0
	other.TopicID = "id-old"
	bad := shareState("g", 7, 0, 0)
	res = tf.ok(putShareStates(1, other, bad, shareState("", 0, 0, 0), shareState("g", 0, 0, 0, ShareRun{Length: 0}), shareState("g", 0, 0, 0, ShareRun{Length: 1, State: 4}))).(ShareStateResults)
	if !errors.Is(res[0], ErrShareStateFenced) || !errors.Is(res[1], ErrUnknownTopic) || !errors.Is(res[2], ErrInvalidGroupID) ||
		!errors.Is(res[3], ErrInvalidPartition) || !errors.Is(res[4], ErrInvalidPartition) {
		t.Fatalf("results %v", res)
	}

	// Broker 1 loses partition 0 to broker 2 (leader epoch 1): its writes
	// at epoch 0 are refused from then on, broker 2's stored.
	tf.ok(fence(1, epochs[1]))
	if leader, epoch, id, ok := tf.f.Image().ShareLeader("t", 0); leader != 2 || epoch != 1 || id != "id-t" || !ok {
		t.Fatalf("after fencing 1: leader %d epoch %d topic id %q %v", leader, epoch, id, ok)
	}
	late := shareState("g", 0, 0, 12)
	res = tf.ok(putShareStates(1, late)).(ShareStateResults)
	if !errors.Is(res[0], ErrShareStateFenced) {
		t.Fatalf("stale leader's write: %v", res)
	}
	s1 := shareState("g", 0, 1, 13, ShareRun{Length: 1, State: runArchived, DeliveryCount: 5})
	if res := tf.ok(putShareStates(2, s1, shareState("h", 1, 0, 1))).(ShareStateResults); res[0] != nil || res[1] != nil {
		t.Fatalf("new leader's write: %v", res)
	}
	want := map[ShareKey]ShareState{s1.ShareKey: s1, {"h", "t", 1}: shareState("h", 1, 0, 1)}
	if !reflect.DeepEqual(tf.f.Image().shareStates, want) {
		t.Fatalf("image %+v, want %+v", tf.f.Image().shareStates, want)
	}
	if stored := tf.storedImage(); !reflect.DeepEqual(stored.shareStates, want) {
		t.Fatalf("store %+v, want %+v", stored.shareStates, want)
	}
	if f := reopen(t, tf); !reflect.DeepEqual(f.Image().shareStates, want) {
		t.Fatalf("reopened %+v, want %+v", f.Image().shareStates, want)
	}

	tf.ok(&pb.Command{Cmd: &pb.Command_DeleteTopic{DeleteTopic: &pb.DeleteTopic{Name: "t"}}})
	if n := tf.f.Image().ShareStateCount(); n != 0 {
		t.Fatalf("%d share states left after deleting their topic", n)
	}
	if n := tf.storedImage().ShareStateCount(); n != 0 {
		t.Fatalf("%d share states left in the store after deleting their topic", n)
	}
}
