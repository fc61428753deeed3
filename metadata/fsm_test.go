package metadata

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/internal/testparallel"
)

func TestMain(m *testing.M) {
	testparallel.Raise()
	goleak.VerifyTestMain(m,
		// hashicorp/raft drops the batches still queued for the FSM when
		// it shuts down, so the waiter of a command committed just before
		// a node stopped is never answered (raftApply has returned by then).
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*deferError).Error"),
	)
}

// testFSM feeds commands straight into Apply, no raft running.
type testFSM struct {
	t     *testing.T
	f     *FSM
	index uint64
}

func newTestFSM(t *testing.T) *testFSM {
	t.Helper()
	f, err := OpenFSM(filepath.Join(t.TempDir(), "metadata.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &testFSM{t: t, f: f}
}

func (tf *testFSM) apply(cmd *pb.Command) any {
	tf.t.Helper()
	data, err := proto.Marshal(cmd)
	if err != nil {
		tf.t.Fatal(err)
	}
	tf.index++
	return tf.f.Apply(&raft.Log{Index: tf.index, Type: raft.LogCommand, Data: data})
}

// storedImage loads the image from tf's store, as a restart would.
func (tf *testFSM) storedImage() *Image {
	tf.t.Helper()
	var stored *Image
	if err := tf.f.db.View(func(tx *bolt.Tx) (err error) {
		stored, err = loadImage(tx)
		return err
	}); err != nil {
		tf.t.Fatal(err)
	}
	return stored
}

func (tf *testFSM) ok(cmd *pb.Command) any {
	tf.t.Helper()
	resp := tf.apply(cmd)
	if err, isErr := resp.(error); isErr {
		tf.t.Fatalf("apply %v: %v", cmd, err)
	}
	return resp
}

func (tf *testFSM) rejected(cmd *pb.Command, want error) {
	tf.t.Helper()
	before := tf.f.Image()
	resp := tf.apply(cmd)
	err, isErr := resp.(error)
	if !isErr || !errors.Is(err, want) {
		tf.t.Fatalf("apply %v: got %v, want %v", cmd, resp, want)
	}
	after := tf.f.Image()
	if !sameImage(before, after) {
		tf.t.Fatal("rejected command changed the image")
	}
	// The store too: a command that wrote to the transaction before it
	// failed would leave the change in bolt (the transaction commits
	// either way) and bring it back on the next load.
	stored := tf.storedImage()
	if !sameImage(before, stored) {
		tf.t.Fatalf("rejected command changed the store:\n%+v\n%+v\nwant\n%+v\n%+v",
			stored.Topics(), allOffsets(stored), before.Topics(), allOffsets(before))
	}
}

// sameImage compares what the image's accessors show: brokers, topics and
// committed offsets.
func sameImage(a, b *Image) bool {
	return reflect.DeepEqual(a.Topics(), b.Topics()) && reflect.DeepEqual(a.Brokers(), b.Brokers()) &&
		reflect.DeepEqual(allOffsets(a), allOffsets(b)) && reflect.DeepEqual(a.GroupRecords(), b.GroupRecords())
}

func register(id int32, inc string) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_RegisterBroker{RegisterBroker: &pb.RegisterBroker{
		BrokerId: id, Incarnation: inc, AdvertisedAddr: "127.0.0.1:1", Rack: "",
	}}}
}

func unfence(id int32, epoch int64) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_UnfenceBroker{UnfenceBroker: &pb.UnfenceBroker{BrokerId: id, BrokerEpoch: epoch}}}
}

func fence(id int32, epoch int64) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_FenceBroker{FenceBroker: &pb.FenceBroker{BrokerId: id, BrokerEpoch: epoch}}}
}

func createTopic(name string, assign ...[]int32) *pb.Command {
	c := &pb.CreateTopic{Name: name, TopicId: "id-" + name, Configs: map[string]string{"retention.ms": "1000"}}
	for i, r := range assign {
		c.Partitions = append(c.Partitions, &pb.PartitionAssignment{Partition: int32(i), Replicas: r, Leader: r[0], Isr: r})
	}
	return &pb.Command{Cmd: &pb.Command_CreateTopic{CreateTopic: c}}
}

// threeBrokers registers and unfences brokers 1..3 and returns their epochs.
func (tf *testFSM) threeBrokers() map[int32]int64 {
	epochs := map[int32]int64{}
	for id := int32(1); id <= 3; id++ {
		epochs[id] = tf.ok(register(id, "inc")).(int64)
		tf.ok(unfence(id, epochs[id]))
	}
	return epochs
}

func TestFSMRegisterAndUnfence(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	epoch := tf.ok(register(1, "a")).(int64)
	if epoch != 1 {
		t.Fatalf("broker epoch %d, want the registration index 1", epoch)
	}
	b, ok := tf.f.Image().Broker(1)
	if !ok || !b.Fenced || b.Epoch != 1 || b.Incarnation != "a" {
		t.Fatalf("broker after register = %+v", b)
	}
	tf.rejected(unfence(1, 99), ErrStaleEpoch)
	tf.rejected(unfence(7, 1), ErrUnknownBroker)
	tf.ok(unfence(1, epoch))
	if b, _ := tf.f.Image().Broker(1); b.Fenced {
		t.Fatal("still fenced after unfence")
	}
	if tf.f.Image().Index() != tf.index {
		t.Fatalf("image index %d, want %d", tf.f.Image().Index(), tf.index)
	}
}

func TestFSMCreateTopicAndDelete(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokers()
	info := tf.ok(createTopic("orders", []int32{1, 2, 3}, []int32{2, 3, 1})).(TopicInfo)
	if len(info.Partitions) != 2 || info.Partitions[1].Leader != 2 || info.Configs["retention.ms"] != "1000" {
		t.Fatalf("created %+v", info)
	}
	// The same create (same topic id) committed again by a retry across a
	// controller change answers the existing topic; another create of the
	// name is refused.
	again := tf.ok(createTopic("orders", []int32{3})).(TopicInfo)
	if !reflect.DeepEqual(again, info) {
		t.Fatalf("replayed create answered %+v, want %+v", again, info)
	}
	other := createTopic("orders", []int32{1})
	other.GetCreateTopic().TopicId = "another-id"
	tf.rejected(other, ErrTopicExists)
	tf.rejected(createTopic("bad", []int32{1, 1}), ErrInvalidPartitions)
	got, ok := tf.f.Image().Topic("orders")
	if !ok || !reflect.DeepEqual(got, info) {
		t.Fatalf("image topic %+v, want %+v", got, info)
	}
	tf.ok(&pb.Command{Cmd: &pb.Command_DeleteTopic{DeleteTopic: &pb.DeleteTopic{Name: "orders"}}})
	if _, ok := tf.f.Image().Topic("orders"); ok {
		t.Fatal("topic still there after delete")
	}
	tf.rejected(&pb.Command{Cmd: &pb.Command_DeleteTopic{DeleteTopic: &pb.DeleteTopic{Name: "orders"}}}, ErrUnknownTopic)
}

func TestFSMFenceMovesLeadershipFromISR(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	epochs := tf.threeBrokers()
	tf.ok(createTopic("t", []int32{1, 2, 3}, []int32{1}, []int32{2, 1}))
	if e, u := tf.f.Elections(); e != 0 || u != 0 {
		t.Fatalf("a new topic counts %d elections, %d unclean", e, u)
	}
	tf.ok(fence(1, epochs[1]))
	// t-0 moves to 2; t-1 goes offline (no election); t-2 keeps 2.
	if e, u := tf.f.Elections(); e != 1 || u != 0 {
		t.Fatalf("after the fence: %d elections, %d unclean; want 1, 0", e, u)
	}
	img := tf.f.Image()
	p0, _ := img.Partition("t", 0)
	if p0.Leader != 2 || p0.LeaderEpoch != 1 || p0.PartitionEpoch != 1 || !reflect.DeepEqual(p0.ISR, []int32{2, 3}) {
		t.Fatalf("t-0 after fence = %+v", p0)
	}
	// Sole ISR member: no leader, ISR keeps it.
	p1, _ := img.Partition("t", 1)
	if p1.Leader != -1 || p1.LeaderEpoch != 1 || !reflect.DeepEqual(p1.ISR, []int32{1}) {
		t.Fatalf("t-1 after fence = %+v", p1)
	}
	// Not the leader: just leaves the ISR.
	p2, _ := img.Partition("t", 2)
	if p2.Leader != 2 || p2.LeaderEpoch != 0 || !reflect.DeepEqual(p2.ISR, []int32{2}) {
		t.Fatalf("t-2 after fence = %+v", p2)
	}
	// Unfencing elects it where it is the only ISR member.
	tf.ok(unfence(1, epochs[1]))
	p1, _ = tf.f.Image().Partition("t", 1)
	if p1.Leader != 1 || p1.LeaderEpoch != 2 {
		t.Fatalf("t-1 after unfence = %+v", p1)
	}
	if e, u := tf.f.Elections(); e != 2 || u != 0 {
		t.Fatalf("after the unfence: %d elections, %d unclean; want 2, 0", e, u)
	}
	tf.rejected(fence(1, epochs[1]+100), ErrStaleEpoch)
}

func TestFSMUncleanElection(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	epochs := tf.threeBrokers()
	c := createTopic("t", []int32{1, 2})
	c.GetCreateTopic().Partitions[0].Isr = []int32{1}
	tf.ok(c)
	cmd := fence(1, epochs[1])
	cmd.GetFenceBroker().Unclean = true
	tf.ok(cmd)
	p, _ := tf.f.Image().Partition("t", 0)
	if p.Leader != 2 || !reflect.DeepEqual(p.ISR, []int32{2}) {
		t.Fatalf("unclean election: %+v", p)
	}
	if e, u := tf.f.Elections(); e != 1 || u != 1 {
		t.Fatalf("%d elections, %d unclean; want 1, 1", e, u)
	}
}

func TestFSMPartitionChangeChecksEpochs(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	epochs := tf.threeBrokers()
	tf.ok(createTopic("t", []int32{1, 2, 3}))
	change := func(leader, leaderEpoch, partitionEpoch int32, isr ...int32) *pb.Command {
		return &pb.Command{Cmd: &pb.Command_PartitionChange{PartitionChange: &pb.PartitionChange{
			Topic: "t", Partition: 0, Leader: leader, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, Isr: isr,
		}}}
	}
	p := tf.ok(change(1, 0, 0, 1, 2)).(PartitionInfo)
	if p.PartitionEpoch != 1 || p.LeaderEpoch != 0 || !reflect.DeepEqual(p.ISR, []int32{1, 2}) {
		t.Fatalf("after shrink: %+v", p)
	}
	tf.rejected(change(1, 0, 0, 1, 2, 3), ErrStaleEpoch)
	tf.rejected(change(1, 0, 1, 1, 4), ErrInvalidPartitions)
	tf.rejected(change(1, 0, 1, 2), ErrInvalidPartitions) // leader outside ISR
	tf.ok(fence(3, epochs[3]))
	tf.rejected(change(1, 0, 1, 1, 2, 3), ErrFencedBroker) // fenced broker cannot rejoin
	tf.rejected(&pb.Command{Cmd: &pb.Command_PartitionChange{PartitionChange: &pb.PartitionChange{Topic: "x", Isr: []int32{1}}}}, ErrUnknownTopic)
}

func TestFSMConfigsAndPartitions(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokers()
	tf.ok(createTopic("t", []int32{1, 2}))
	tf.ok(&pb.Command{Cmd: &pb.Command_AlterConfigs{AlterConfigs: &pb.AlterConfigs{
		Topic: "t", Set: map[string]string{"segment.bytes": "4096"}, Delete: []string{"retention.ms"},
	}}})
	if ti, _ := tf.f.Image().Topic("t"); !reflect.DeepEqual(ti.Configs, map[string]string{"segment.bytes": "4096"}) {
		t.Fatalf("configs %v", ti.Configs)
	}
	add := func(first int32) *pb.Command {
		return &pb.Command{Cmd: &pb.Command_CreatePartitions{CreatePartitions: &pb.CreatePartitions{Topic: "t", Partitions: []*pb.PartitionAssignment{
			{Partition: first, Replicas: []int32{2, 3}, Leader: 2, Isr: []int32{2, 3}},
		}}}}
	}
	tf.ok(add(1))
	tf.rejected(add(1), ErrInvalidPartitions)
	if ti, _ := tf.f.Image().Topic("t"); len(ti.Partitions) != 2 || ti.Partitions[1].Leader != 2 {
		t.Fatalf("after create partitions: %+v", ti)
	}
}

func TestFSMReRegisterNewIncarnationMovesAway(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokers()
	tf.ok(createTopic("t", []int32{1, 2, 3}))
	e := tf.ok(register(1, "wiped")).(int64)
	b, _ := tf.f.Image().Broker(1)
	if !b.Fenced || b.Epoch != e || b.Incarnation != "wiped" {
		t.Fatalf("re-registered broker %+v", b)
	}
	p, _ := tf.f.Image().Partition("t", 0)
	if p.Leader != 2 || slices.Contains(p.ISR, 1) {
		t.Fatalf("partition after re-registration %+v", p)
	}
}

func TestFSMControllerChangeSetsClusterIDOnce(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	cc := func(id int32, cluster string) *pb.Command {
		return &pb.Command{Cmd: &pb.Command_ControllerChange{ControllerChange: &pb.ControllerChange{ControllerId: id, ClusterId: cluster}}}
	}
	tf.ok(cc(1, "c1"))
	tf.ok(cc(2, ""))
	tf.rejected(cc(3, "other"), ErrClusterIDMismatch)
	img := tf.f.Image()
	if img.ClusterID() != "c1" || img.ControllerID() != 2 {
		t.Fatalf("cluster %q controller %d", img.ClusterID(), img.ControllerID())
	}
}

func TestFSMMalformedCommandPanics(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	defer func() {
		if recover() == nil {
			t.Fatal("malformed command did not panic")
		}
	}()
	tf.f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{0xff, 0xff, 0xff}})
}

func TestFSMReplayedIndexSkipped(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	tf.threeBrokers()
	data, _ := proto.Marshal(createTopic("t", []int32{1}))
	tf.f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: data})
	if _, ok := tf.f.Image().Topic("t"); ok {
		t.Fatal("an already applied index was applied again")
	}
}

// sink is an in-memory raft.SnapshotSink.
type sink struct{ bytes.Buffer }

func (s *sink) ID() string    { return "test" }
func (s *sink) Cancel() error { return nil }
func (s *sink) Close() error  { return nil }

func TestFSMSnapshotRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	tf := newTestFSM(t)
	epochs := tf.threeBrokers()
	tf.ok(createTopic("a", []int32{1, 2, 3}, []int32{2, 3, 1}))
	tf.ok(createTopic("b", []int32{3}))
	tf.ok(fence(2, epochs[2]))
	tf.ok(&pb.Command{Cmd: &pb.Command_ControllerChange{ControllerChange: &pb.ControllerChange{ControllerId: 1, ClusterId: "c"}}})

	snap, err := tf.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Changes after the snapshot are not in it.
	tf.ok(createTopic("c", []int32{1}))
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	other := newTestFSM(t)
	if err := other.f.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	want, got := tf.f.Image(), other.f.Image()
	if got.Index() != tf.index-1 || got.ClusterID() != "c" || got.ControllerID() != 1 {
		t.Fatalf("restored index %d cluster %q controller %d", got.Index(), got.ClusterID(), got.ControllerID())
	}
	if !reflect.DeepEqual(got.Brokers(), want.Brokers()) {
		t.Fatalf("brokers differ:\n%+v\n%+v", got.Brokers(), want.Brokers())
	}
	if _, ok := got.Topic("c"); ok {
		t.Fatal("snapshot holds a later change")
	}
	for _, name := range []string{"a", "b"} {
		a, _ := want.Topic(name)
		b, _ := got.Topic(name)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("topic %s differs:\n%+v\n%+v", name, a, b)
		}
	}
	// The restored FSM keeps applying.
	other.index = got.Index()
	other.ok(createTopic("c", []int32{1}))
	if !reflect.DeepEqual(other.f.Image().Topics(), tf.f.Image().Topics()) {
		t.Fatal("images diverge after the same commands")
	}
}

func TestFSMReopenKeepsImage(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "metadata.db")
	f, err := OpenFSM(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	tf := &testFSM{t: t, f: f}
	tf.threeBrokers()
	tf.ok(createTopic("a", []int32{1, 2}))
	want := f.Image().Topics()
	f.Close()
	f2, err := OpenFSM(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if !reflect.DeepEqual(f2.Image().Topics(), want) || f2.Image().Index() != tf.index {
		t.Fatal("reopened image differs")
	}
}
