package metadata

import (
	"reflect"
	"slices"
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
)

func unregister(id int32, epoch int64) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_UnregisterBroker{UnregisterBroker: &pb.UnregisterBroker{BrokerId: id, BrokerEpoch: epoch}}}
}

// TestFSMUnregisterBroker: only a fenced broker at its current epoch can
// be unregistered; it leaves the image and every ISR (a partition it was
// the only in-sync replica of goes offline with an empty ISR and a bumped
// leader epoch) but stays in every replica list; the store keeps the
// removal across a reopen, and a later registration is a new broker.
func TestFSMUnregisterBroker(t *testing.T) {
	t.Parallel()
	tf, epochs := dirFixture(t)
	tf.rejected(unregister(1, epochs[1]), ErrBrokerNotRemovable) // unfenced
	tf.rejected(unregister(9, 0), ErrUnknownBroker)
	tf.ok(fence(1, epochs[1]))
	tf.rejected(unregister(1, epochs[1]+100), ErrStaleEpoch)

	// After the fence: t-0 led by 2 (ISR 2 3), t-1 and t-2 offline with
	// broker 1 the last ISR member, t-3 led by 2 (ISR 2).
	t1, t2 := tf.part(1), tf.part(2)
	if t1.Leader != -1 || !slices.Equal(t1.ISR, []int32{1}) {
		t.Fatalf("t-1 after fence: %+v", t1)
	}
	before := map[int32]PartitionInfo{}
	for p := int32(0); p < 4; p++ {
		before[p] = tf.part(p)
	}
	tf.ok(unregister(1, epochs[1]))

	img := tf.f.Image()
	if _, ok := img.Broker(1); ok {
		t.Fatal("broker 1 still in the image")
	}
	if len(img.Brokers()) != 2 {
		t.Fatalf("brokers %v", img.Brokers())
	}
	tf.wantPart(0, 2, before[0].LeaderEpoch, 2, 3)
	tf.wantPart(1, -1, t1.LeaderEpoch+1)
	tf.wantPart(2, -1, t2.LeaderEpoch+1)
	tf.wantPart(3, 2, before[3].LeaderEpoch, 2)
	for p := int32(0); p < 4; p++ {
		if got := tf.part(p).Replicas; !reflect.DeepEqual(got, before[p].Replicas) {
			t.Fatalf("t-%d replicas %v, want %v (kept)", p, got, before[p].Replicas)
		}
	}
	tf.rejected(unregister(1, 0), ErrUnknownBroker)

	// Persisted: a reopened store has the same image.
	wantTopics, wantBrokers := img.Topics(), img.Brokers()
	path := tf.f.path
	tf.f.Close()
	f2, err := OpenFSM(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f2.Close() })
	if !reflect.DeepEqual(f2.Image().Topics(), wantTopics) || !reflect.DeepEqual(f2.Image().Brokers(), wantBrokers) {
		t.Fatal("reopened image differs")
	}

	// The id registering again is a new broker: fenced, then unfenced, and
	// elected nowhere (it is in no ISR).
	tf.f = f2
	e := tf.ok(registerDir(1, "new", "d9")).(int64)
	tf.ok(unfence(1, e))
	tf.wantPart(1, -1, t1.LeaderEpoch+1)
	if b, ok := tf.f.Image().Broker(1); !ok || b.Fenced || b.DirectoryID != "d9" {
		t.Fatalf("re-registered broker 1: %+v %v", b, ok)
	}
}
