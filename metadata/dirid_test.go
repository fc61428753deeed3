package metadata

import (
	"reflect"
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
)

// Tests of the log directory id a broker registers with: the same id is a
// restart (today's behaviour), another one means its data is gone.

func registerDir(id int32, inc, dir string) *pb.Command {
	c := register(id, inc)
	c.GetRegisterBroker().DirectoryId = dir
	return c
}

// dirFixture registers and unfences brokers 1..3 with directories d1..d3
// and creates topic t:
//
//	t-0 replicas [1 2 3], ISR [1 2 3], leader 1  (shared)
//	t-1 replicas [1],     ISR [1],     leader 1  (replication factor 1)
//	t-2 replicas [1 2],   ISR [1],     leader 1  (ISR shrunk to broker 1)
//	t-3 replicas [2 1],   ISR [2 1],   leader 2  (broker 1 follows)
func dirFixture(t *testing.T) (*testFSM, map[int32]int64) {
	tf := newTestFSM(t)
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		epochs[id] = tf.ok(registerDir(id, "inc", "d"+string(rune('0'+id)))).(int64)
		tf.ok(unfence(id, epochs[id]))
	}
	c := createTopic("t", []int32{1, 2, 3}, []int32{1}, []int32{1, 2}, []int32{2, 1})
	c.GetCreateTopic().Partitions[2].Isr = []int32{1}
	tf.ok(c)
	return tf, epochs
}

func (tf *testFSM) part(p int32) PartitionInfo {
	tf.t.Helper()
	pi, ok := tf.f.Image().Partition("t", p)
	if !ok {
		tf.t.Fatalf("no t-%d", p)
	}
	return pi
}

func (tf *testFSM) wantPart(p int32, leader, leaderEpoch int32, isr ...int32) {
	tf.t.Helper()
	got := tf.part(p)
	if isr == nil {
		isr = []int32{}
	}
	gotISR := got.ISR
	if gotISR == nil {
		gotISR = []int32{}
	}
	if got.Leader != leader || got.LeaderEpoch != leaderEpoch || !reflect.DeepEqual(gotISR, isr) {
		tf.t.Fatalf("t-%d = leader %d epoch %d isr %v; want leader %d epoch %d isr %v",
			p, got.Leader, got.LeaderEpoch, got.ISR, leader, leaderEpoch, isr)
	}
}

// TestFSMReRegisterSameDirectoryKeepsTrust: a restart with the same log
// directory keeps today's behaviour: the broker leaves the ISRs it shares
// and its leaderships move, but where it is the only in-sync replica it
// stays in the ISR and is elected again when unfenced, its data intact.
func TestFSMReRegisterSameDirectoryKeepsTrust(t *testing.T) {
	t.Parallel()
	tf, _ := dirFixture(t)
	e := tf.ok(registerDir(1, "restart", "d1")).(int64)
	if b, _ := tf.f.Image().Broker(1); b.DirectoryID != "d1" || !b.Fenced || b.Epoch != e {
		t.Fatalf("broker 1 after restart: %+v", b)
	}
	tf.wantPart(0, 2, 1, 2, 3)
	tf.wantPart(1, -1, 1, 1)
	tf.wantPart(2, -1, 1, 1)
	tf.wantPart(3, 2, 0, 2)
	tf.ok(unfence(1, e))
	tf.wantPart(1, 1, 2, 1)
	tf.wantPart(2, 1, 2, 1)

	// A registration without a directory id (unknown) is a restart too,
	// and keeps the recorded id.
	e = tf.ok(register(1, "no-dir")).(int64)
	if b, _ := tf.f.Image().Broker(1); b.DirectoryID != "d1" {
		t.Fatalf("directory id after a registration without one: %+v", b)
	}
	tf.wantPart(1, -1, 3, 1)
	tf.ok(unfence(1, e))
	tf.wantPart(1, 1, 4, 1)
}

// TestFSMReRegisterNewDirectoryDropsData: a broker back with another log
// directory id has lost its data: it leaves every ISR, even as the only
// member; those partitions go offline (leader -1, leader epoch bumped,
// empty ISR) and unfencing does not elect it; the rest move as for any
// restart. The new id is recorded and survives a reopen of the store.
func TestFSMReRegisterNewDirectoryDropsData(t *testing.T) {
	t.Parallel()
	tf, epochs := dirFixture(t)
	e := tf.ok(registerDir(1, "wiped", "d1-new")).(int64)
	if b, _ := tf.f.Image().Broker(1); b.DirectoryID != "d1-new" || !b.Fenced || b.Epoch != e {
		t.Fatalf("broker 1 after wipe: %+v", b)
	}
	tf.wantPart(0, 2, 1, 2, 3)
	tf.wantPart(1, -1, 1)
	tf.wantPart(2, -1, 1)
	tf.wantPart(3, 2, 0, 2)
	if p := tf.part(1); p.PartitionEpoch != 1 || !reflect.DeepEqual(p.Replicas, []int32{1}) {
		t.Fatalf("t-1: %+v (replicas must stay)", p)
	}

	tf.ok(unfence(1, e))
	tf.wantPart(1, -1, 1)
	tf.wantPart(2, -1, 1)
	// The rest of the image follows as usual: broker 1 may rejoin an ISR
	// through a leader's PartitionChange once it caught up.
	p0 := tf.part(0)
	tf.ok(&pb.Command{Cmd: &pb.Command_PartitionChange{PartitionChange: &pb.PartitionChange{
		Topic: "t", Partition: 0, Leader: p0.Leader, LeaderEpoch: p0.LeaderEpoch, PartitionEpoch: p0.PartitionEpoch, Isr: []int32{2, 3, 1},
	}}})
	tf.wantPart(0, 2, 1, 2, 3, 1)

	// A second restart with the new directory is a plain restart again.
	tf.ok(registerDir(1, "again", "d1-new"))
	tf.wantPart(0, 2, 1, 2, 3)
	tf.wantPart(1, -1, 1)
	// A live replica outside the (empty) ISR is not elected either.
	tf.ok(fence(2, epochs[2]))
	tf.ok(unfence(2, epochs[2]))
	tf.wantPart(2, -1, 1)

	// Persisted: a reopened store has the same brokers and partitions.
	want := tf.f.Image()
	tf.f.Close()
	f2, err := OpenFSM(tf.f.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if !reflect.DeepEqual(f2.Image().Brokers(), want.Brokers()) || !reflect.DeepEqual(f2.Image().Topics(), want.Topics()) {
		t.Fatalf("reopened image differs:\n%+v\nvs\n%+v", f2.Image().Brokers(), want.Brokers())
	}
}

// TestFSMNewDirectoryAfterFence: the broker was already fenced (its
// session expired, leaving it the last ISR member of a leaderless
// partition) when it comes back wiped: the ISR empties and the leader
// epoch is bumped although the leader stays -1.
func TestFSMNewDirectoryAfterFence(t *testing.T) {
	t.Parallel()
	tf, epochs := dirFixture(t)
	tf.ok(fence(1, epochs[1]))
	tf.wantPart(1, -1, 1, 1)
	tf.ok(registerDir(1, "wiped", "d1-new"))
	tf.wantPart(1, -1, 2)
	if p := tf.part(1); p.PartitionEpoch != 2 {
		t.Fatalf("t-1 partition epoch %d, want 2", p.PartitionEpoch)
	}
}

// TestFSMNewDirectoryUncleanElection: with unclean leader election the
// wiped broker is elected where it is the only live replica (its ISR is
// then just itself), and not elected where a live in-sync replica exists.
func TestFSMNewDirectoryUncleanElection(t *testing.T) {
	t.Parallel()
	tf, _ := dirFixture(t)
	e := tf.ok(registerDir(1, "wiped", "d1-new")).(int64)
	cmd := unfence(1, e)
	cmd.GetUnfenceBroker().Unclean = true
	tf.ok(cmd)
	tf.wantPart(0, 2, 1, 2, 3)
	tf.wantPart(1, 1, 2, 1)
	tf.wantPart(2, 1, 2, 1)
	tf.wantPart(3, 2, 0, 2)
}
