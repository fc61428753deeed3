package metadata

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/internal/poll"
)

// reassignFixture: brokers 1..6 live at the latest metadata.version, and
// topic "t" with partition 0 on 1,2,3 (leader 1) and partition 1 on 2,3,1.
func reassignFixture(t *testing.T) (*testFSM, map[int32]int64) {
	t.Helper()
	tf := newTestFSM(t)
	epochs := map[int32]int64{}
	for id := int32(1); id <= 6; id++ {
		epochs[id] = tf.ok(registerVersions(id, "inc", SupportedMetadataVersions())).(int64)
		tf.ok(unfence(id, epochs[id]))
	}
	tf.ok(featureLevel(LatestMetadataVersion))
	tf.ok(createTopic("t", []int32{1, 2, 3}, []int32{2, 3, 1}))
	return tf, epochs
}

type move struct {
	p      int32
	target []int32
	cancel bool
	minISR int32
	topic  string
}

func reassignCmd(moves ...move) *pb.Command {
	c := &pb.ReassignPartitions{}
	for _, m := range moves {
		topic := m.topic
		if topic == "" {
			topic = "t"
		}
		c.Partitions = append(c.Partitions, &pb.PartitionReassignment{Topic: topic, Partition: m.p, TargetReplicas: m.target,
			Cancel: m.cancel, MinInsyncReplicas: m.minISR})
	}
	return &pb.Command{Cmd: &pb.Command_ReassignPartitions{ReassignPartitions: c}}
}

// isr is the partition leader's AlterPartition: the ISR asked for at the
// current epochs.
func (tf *testFSM) isr(p int32, isr ...int32) PartitionInfo {
	tf.t.Helper()
	cur := tf.part(p)
	return tf.ok(&pb.Command{Cmd: &pb.Command_PartitionChange{PartitionChange: &pb.PartitionChange{
		Topic: "t", Partition: p, Leader: cur.Leader, LeaderEpoch: cur.LeaderEpoch, Isr: isr, PartitionEpoch: cur.PartitionEpoch,
	}}}).(PartitionInfo)
}

// wantState checks a partition's replicas, pending sets, ISR and leader.
func (tf *testFSM) wantState(p int32, replicas, adding, removing, isr []int32, leader int32) PartitionInfo {
	tf.t.Helper()
	got := tf.part(p)
	if !slices.Equal(got.Replicas, replicas) || !slices.Equal(got.AddingReplicas, adding) || !slices.Equal(got.RemovingReplicas, removing) ||
		!slices.Equal(got.ISR, isr) || got.Leader != leader {
		tf.t.Fatalf("partition %d = replicas %v adding %v removing %v isr %v leader %d, want %v %v %v %v %d",
			p, got.Replicas, got.AddingReplicas, got.RemovingReplicas, got.ISR, got.Leader, replicas, adding, removing, isr, leader)
	}
	// The store holds the same: a restarted node or a new controller
	// carries on from it.
	stored, _ := tf.storedImage().Partition("t", p)
	if !reflect.DeepEqual(stored, got) {
		tf.t.Fatalf("stored partition %+v, image %+v", stored, got)
	}
	return got
}

// Every step of a move that replaces the leader: the new replica is added
// (not in the ISR), joins the ISR when its leader says it caught up, and
// that same change completes the move: the leader hands over to a target
// replica in the ISR and the removed one leaves the replicas and the ISR.
func TestFSMReassignEveryStep(t *testing.T) {
	t.Parallel()
	tf, _ := reassignFixture(t)
	before := tf.part(0)
	tf.ok(reassignCmd(move{p: 0, target: []int32{2, 3, 4}, minISR: 2}))
	started := tf.wantState(0, []int32{2, 3, 4, 1}, []int32{4}, []int32{1}, []int32{1, 2, 3}, 1)
	if started.LeaderEpoch != before.LeaderEpoch || started.PartitionEpoch <= before.PartitionEpoch {
		t.Fatalf("start: epochs %d/%d, were %d/%d (the leader stays, the partition epoch rises)",
			started.LeaderEpoch, started.PartitionEpoch, before.LeaderEpoch, before.PartitionEpoch)
	}
	if got := tf.f.Image().Reassignments(); len(got) != 1 || got[0].Partition != 0 {
		t.Fatalf("pending reassignments %+v", got)
	}
	if tg := started.TargetReplicas(); !slices.Equal(tg, []int32{2, 3, 4}) {
		t.Fatalf("target %v", tg)
	}
	// The original replicas, in the order the replicas keep them (as in
	// Kafka, a cancel does not restore their first order).
	if og := started.OriginalReplicas(); !slices.Equal(og, []int32{2, 3, 1}) {
		t.Fatalf("original %v", og)
	}
	// A follower dropping out does not complete anything.
	tf.isr(0, 1, 2)
	tf.wantState(0, []int32{2, 3, 4, 1}, []int32{4}, []int32{1}, []int32{1, 2}, 1)
	// 4 caught up, 3 back: every target replica is in the ISR.
	tf.isr(0, 1, 2, 4)
	tf.wantState(0, []int32{2, 3, 4, 1}, []int32{4}, []int32{1}, []int32{1, 2, 4}, 1)
	got := tf.isr(0, 1, 2, 4, 3)
	done := tf.wantState(0, []int32{2, 3, 4}, nil, nil, []int32{2, 4, 3}, 2)
	if !reflect.DeepEqual(got, done) {
		t.Fatalf("AlterPartition answered %+v, the image has %+v", got, done)
	}
	if done.LeaderEpoch != before.LeaderEpoch+1 {
		t.Fatalf("leader epoch %d after the leader moved, want %d", done.LeaderEpoch, before.LeaderEpoch+1)
	}
	if got := tf.f.Image().Reassignments(); len(got) != 0 {
		t.Fatalf("pending after completion: %+v", got)
	}
	// The other partition was never touched.
	if p1 := tf.part(1); !slices.Equal(p1.Replicas, []int32{2, 3, 1}) || p1.PartitionEpoch != 0 {
		t.Fatalf("partition 1 = %+v", p1)
	}
}

// A target whose replicas are all in the ISR already (a replica removed,
// or the order changed) completes in the command itself.
func TestFSMReassignWithinISRCompletesAtOnce(t *testing.T) {
	t.Parallel()
	tf, _ := reassignFixture(t)
	tf.ok(reassignCmd(move{p: 0, target: []int32{3, 2}, minISR: 2}))
	tf.wantState(0, []int32{3, 2}, nil, nil, []int32{2, 3}, 3)
	tf.ok(reassignCmd(move{p: 1, target: []int32{1, 3, 2}}))
	tf.wantState(1, []int32{1, 3, 2}, nil, nil, []int32{2, 3, 1}, 2)
	// The same replicas again: nothing to do, nothing changes.
	p := tf.part(1)
	tf.ok(reassignCmd(move{p: 1, target: []int32{1, 3, 2}}))
	if again := tf.part(1); !reflect.DeepEqual(again, p) {
		t.Fatalf("a no-op reassignment changed %+v into %+v", p, again)
	}
}

// A cancel goes back to the original replicas at any point before the
// move completes, keeping only them in the ISR.
func TestFSMReassignCancel(t *testing.T) {
	t.Parallel()
	tf, _ := reassignFixture(t)
	tf.rejected(reassignCmd(move{p: 0, cancel: true}), ErrNoReassignmentInProgress)
	tf.ok(reassignCmd(move{p: 0, target: []int32{4, 5, 6}, minISR: 2}))
	tf.wantState(0, []int32{4, 5, 6, 1, 2, 3}, []int32{4, 5, 6}, []int32{1, 2, 3}, []int32{1, 2, 3}, 1)
	tf.isr(0, 1, 2, 3, 4)
	tf.isr(0, 1, 2, 3, 4, 5)
	tf.rejected(reassignCmd(move{p: 0, cancel: true, target: []int32{1}}), ErrInvalidReassignment)
	tf.ok(reassignCmd(move{p: 0, cancel: true}))
	tf.wantState(0, []int32{1, 2, 3}, nil, nil, []int32{1, 2, 3}, 1)
}

// A cancel after the leader moved to a replica being added (its broker
// fenced meanwhile) hands leadership back to an original replica in the
// ISR; one that would leave too few in-sync copies of the committed
// records is refused.
func TestFSMReassignCancelMovesLeaderBack(t *testing.T) {
	t.Parallel()
	tf, epochs := reassignFixture(t)
	tf.ok(reassignCmd(move{p: 0, target: []int32{4, 5, 6}, minISR: 2}))
	tf.isr(0, 1, 2, 3, 4, 5)
	tf.isr(0, 1, 3, 4, 5) // 2 fell behind
	tf.ok(fence(1, epochs[1]))
	p := tf.wantState(0, []int32{4, 5, 6, 1, 2, 3}, []int32{4, 5, 6}, []int32{1, 2, 3}, []int32{3, 4, 5}, 4)
	// Back to 1,2,3 would keep one in-sync copy (3) of what 3,4,5 hold.
	tf.rejected(reassignCmd(move{p: 0, cancel: true, minISR: 2}), ErrInvalidReassignment)
	tf.ok(reassignCmd(move{p: 0, cancel: true, minISR: 1}))
	got := tf.wantState(0, []int32{1, 2, 3}, nil, nil, []int32{3}, 3)
	if got.LeaderEpoch != p.LeaderEpoch+1 {
		t.Fatalf("leader epoch %d, want %d", got.LeaderEpoch, p.LeaderEpoch+1)
	}
}

// A new reassignment of a partition being reassigned replaces the pending
// one, computed from the original replicas: replicas being added that the
// new target lacks leave; those it keeps stay, in the ISR if they were.
func TestFSMReassignReplaces(t *testing.T) {
	t.Parallel()
	tf, _ := reassignFixture(t)
	tf.ok(reassignCmd(move{p: 0, target: []int32{1, 2, 4}}))
	tf.wantState(0, []int32{1, 2, 4, 3}, []int32{4}, []int32{3}, []int32{1, 2, 3}, 1)
	tf.ok(reassignCmd(move{p: 0, target: []int32{1, 2, 5}}))
	tf.wantState(0, []int32{1, 2, 5, 3}, []int32{5}, []int32{3}, []int32{1, 2, 3}, 1)
	tf.ok(reassignCmd(move{p: 0, target: []int32{5, 6, 4}}))
	tf.wantState(0, []int32{5, 6, 4, 1, 2, 3}, []int32{5, 6, 4}, []int32{1, 2, 3}, []int32{1, 2, 3}, 1)
	tf.isr(0, 1, 2, 3, 5)
	// 5 is in sync and stays, 6 and 4 leave; with 2 and 3 kept, every
	// target replica is in the ISR: complete, 5 leads.
	tf.ok(reassignCmd(move{p: 0, target: []int32{5, 2, 3}}))
	tf.wantState(0, []int32{5, 2, 3}, nil, nil, []int32{2, 3, 5}, 5)
}

// A bad request is refused as a whole: nothing changes, not even the
// partitions it names correctly.
func TestFSMReassignRefusedAsAWhole(t *testing.T) {
	t.Parallel()
	tf, epochs := reassignFixture(t)
	tf.ok(&pb.Command{Cmd: &pb.Command_CordonBroker{CordonBroker: &pb.CordonBroker{BrokerId: 6, Cordoned: true}}})
	tf.ok(fence(5, epochs[5]))
	good := move{p: 1, target: []int32{4, 3, 1}}
	for name, bad := range map[string]move{
		"unknown broker":        {p: 0, target: []int32{1, 2, 9}},
		"fenced broker":         {p: 0, target: []int32{1, 2, 5}},
		"cordoned broker":       {p: 0, target: []int32{1, 2, 6}},
		"duplicate replica":     {p: 0, target: []int32{1, 2, 2}},
		"no replicas":           {p: 0},
		"below min.insync":      {p: 0, target: []int32{1}, minISR: 2},
		"cancel with none":      {p: 0, cancel: true},
		"unknown partition":     {p: 7, target: []int32{1, 2, 3}},
		"unknown topic":         {topic: "nope", target: []int32{1, 2, 3}},
		"same partition twice:": {p: 1, target: []int32{1, 2, 3}},
	} {
		t.Run(name, func(t *testing.T) {
			want := ErrInvalidReassignment
			switch name {
			case "unknown partition", "unknown topic":
				want = ErrUnknownTopic
			case "cancel with none":
				want = ErrNoReassignmentInProgress
			}
			tf.t = t
			tf.rejected(reassignCmd(good, bad), want)
		})
	}
	tf.t = t
	// A broker already a replica may stay though fenced or cordoned.
	tf.ok(reassignCmd(move{p: 0, target: []int32{1, 2}}))
	tf.wantState(0, []int32{1, 2}, nil, nil, []int32{1, 2}, 1)
	tf.ok(&pb.Command{Cmd: &pb.Command_CordonBroker{CordonBroker: &pb.CordonBroker{BrokerId: 1, Cordoned: true}}})
	// A new order moves no leadership (a preferred election does).
	tf.ok(reassignCmd(move{p: 0, target: []int32{2, 1}}))
	tf.wantState(0, []int32{2, 1}, nil, nil, []int32{1, 2}, 1)
	tf.rejected(&pb.Command{Cmd: &pb.Command_CordonBroker{CordonBroker: &pb.CordonBroker{BrokerId: 9, Cordoned: true}}}, ErrUnknownBroker)
}

// A removed leader whose broker fails mid-move loses leadership to an
// ISR member as any leader would; the move still completes once every
// target replica is in the ISR, and a cordoned broker takes no new
// replica from a plan.
func TestFSMReassignSurvivesFencing(t *testing.T) {
	t.Parallel()
	tf, epochs := reassignFixture(t)
	tf.ok(reassignCmd(move{p: 0, target: []int32{4, 2, 3}, minISR: 2}))
	tf.ok(fence(1, epochs[1]))
	tf.wantState(0, []int32{4, 2, 3, 1}, []int32{4}, []int32{1}, []int32{2, 3}, 2)
	tf.isr(0, 2, 3, 4)
	tf.wantState(0, []int32{4, 2, 3}, nil, nil, []int32{2, 3, 4}, 2)
	// Snapshot and restore (a new controller, a restarted node) keep a
	// pending reassignment.
	tf.ok(reassignCmd(move{p: 1, target: []int32{5, 6, 2}}))
	img := tf.storedImage()
	if r := img.Reassignments(); len(r) != 1 || !slices.Equal(r[0].AddingReplicas, []int32{5, 6}) || !slices.Equal(r[0].RemovingReplicas, []int32{3, 1}) {
		t.Fatalf("stored reassignments %+v", r)
	}
}

func TestFSMCordonKeepsNewReplicasOff(t *testing.T) {
	t.Parallel()
	tf, _ := reassignFixture(t)
	tf.ok(&pb.Command{Cmd: &pb.Command_CordonBroker{CordonBroker: &pb.CordonBroker{BrokerId: 2, Cordoned: true}}})
	if b, _ := tf.storedImage().Broker(2); !b.Cordoned {
		t.Fatal("cordon not stored")
	}
	img := tf.f.Image()
	assign, err := PlanTopic(img, TopicSpec{Name: "new", Partitions: 12, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range assign {
		if slices.Contains(r, 2) {
			t.Fatalf("a new topic placed a replica on cordoned broker 2: %v", assign)
		}
	}
	tf.ok(&pb.Command{Cmd: &pb.Command_CordonBroker{CordonBroker: &pb.CordonBroker{BrokerId: 2}}})
	if b, _ := tf.f.Image().Broker(2); b.Cordoned {
		t.Fatal("still cordoned")
	}
}

// The controller side, over a real raft quorum: a move started through
// one controller survives its failover, and the new one completes it
// when the new replica joins the ISR.
func TestControllerReassignSurvivesFailover(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, 0, nil)
	for i := int32(1); i <= 4; i++ {
		c.startBrokerAt(i, SupportedMetadataVersions())
	}
	c.waitBrokersLive(1, 2, 3, 4)
	poll.True(t, "metadata.version raised", func() bool {
		return c.waitController().Image().MetadataVersion() == LatestMetadataVersion
	})
	c.createTopic(TopicSpec{Name: "t", Partitions: 1, Assignment: [][]int32{{1, 2, 3}}})
	ctl := c.waitController()
	ctx := context.Background()
	_, err := ctl.Ctl().AlterPartitionReassignments(ctx, []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{4, 2, 3}}}, map[string]int32{"t": 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ctl.Ctl().AlterPartitionReassignments(ctx, []Reassignment{{Topic: "t", Partition: 0, Replicas: []int32{4, 4, 3}}}, nil)
	if !errors.Is(err, ErrInvalidReassignment) {
		t.Fatalf("duplicate replica: %v", err)
	}
	c.stop(int(ctl.ID() - 1))
	next := c.waitController()
	p, _ := next.Image().Partition("t", 0)
	if !slices.Equal(p.AddingReplicas, []int32{4}) || !slices.Equal(p.RemovingReplicas, []int32{1}) {
		t.Fatalf("after failover: %+v", p)
	}
	// The leader (1, being removed) says 4 caught up.
	var np PartitionInfo
	poll.Until(t, "4 joins the ISR", func() error {
		ctl := c.waitController()
		p, _ := ctl.Image().Partition("t", 0)
		np, err = ctl.Ctl().AlterPartition(ctx, "t", 0, p.Leader, p.LeaderEpoch, p.PartitionEpoch, append(slices.Clone(p.ISR), 4))
		return err
	})
	if !slices.Equal(np.Replicas, []int32{4, 2, 3}) || np.Reassigning() || np.Leader != 4 {
		t.Fatalf("completed move: %+v", np)
	}
}

func TestFSMBrokerThrottle(t *testing.T) {
	t.Parallel()
	tf, _ := reassignFixture(t)
	if b, _ := tf.f.Image().Broker(1); b.ReassignmentThrottle != -1 {
		t.Fatalf("throttle %d before any is set, want -1", b.ReassignmentThrottle)
	}
	throttle := func(bps int64, unset bool, ids ...int32) *pb.Command {
		return &pb.Command{Cmd: &pb.Command_BrokerThrottle{BrokerThrottle: &pb.BrokerThrottle{BrokerIds: ids, BytesPerSecond: bps, Unset: unset}}}
	}
	tf.rejected(throttle(100, false, 1, 9), ErrUnknownBroker)
	tf.rejected(throttle(-5, false, 1), ErrInvalidReassignment)
	tf.ok(throttle(1000, false, 1, 2))
	tf.ok(throttle(0, false, 3))
	// A restart keeps it.
	tf.ok(registerVersions(1, "again", SupportedMetadataVersions()))
	img := tf.storedImage()
	for id, want := range map[int32]int64{1: 1000, 2: 1000, 3: 0, 4: -1} {
		if b, _ := img.Broker(id); b.ReassignmentThrottle != want {
			t.Errorf("broker %d throttle %d, want %d", id, b.ReassignmentThrottle, want)
		}
	}
	tf.ok(throttle(0, true, 2))
	if b, _ := tf.storedImage().Broker(2); b.ReassignmentThrottle != -1 {
		t.Fatalf("unset throttle %d", b.ReassignmentThrottle)
	}
}
