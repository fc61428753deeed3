package metadata

import (
	"context"
	"errors"
	"github.com/quirelog/quire/internal/poll"
	"math"
	"strings"
	"testing"

	pb "github.com/quirelog/quire/api/metapb"
)

func budget(id int32, epoch int64, max int32) *pb.Command {
	return &pb.Command{Cmd: &pb.Command_BrokerBudget{BrokerBudget: &pb.BrokerBudget{BrokerId: id, BrokerEpoch: epoch, MaxPartitions: max}}}
}

// An absurd partition count is refused before anything is sized by it: a
// placement of 2^31-1 partitions would need tens of GiB, so the test would
// die of it rather than fail.
func TestControllerPlanRefusesAbsurdCounts(t *testing.T) {
	tf := newTestFSM(t)
	tf.threeBrokers()
	tf.ok(createTopic("t", []int32{1}))
	img := tf.f.Image()
	for _, n := range []int32{math.MaxInt32, MaxPartitionsPerRequest + 1} {
		_, err := PlanTopic(img, TopicSpec{Name: "big", Partitions: n, ReplicationFactor: 3})
		if !errors.Is(err, ErrInvalidPartitions) || !strings.Contains(err.Error(), "10000") {
			t.Errorf("PlanTopic(%d): %v", n, err)
		}
		// "t" has 1 partition: to n+1 adds n.
		_, _, err = PlanPartitions(img, "t", min(n, math.MaxInt32-1)+1)
		if !errors.Is(err, ErrInvalidPartitions) || !strings.Contains(err.Error(), "10000") {
			t.Errorf("PlanPartitions(%d): %v", n, err)
		}
	}
	big := make([][]int32, MaxPartitionsPerRequest+1)
	for i := range big {
		big[i] = []int32{1}
	}
	if _, err := PlanTopic(img, TopicSpec{Name: "big", Assignment: big}); !errors.Is(err, ErrInvalidPartitions) {
		t.Errorf("explicit assignment of %d partitions: %v", len(big), err)
	}
	// At the cap, no budget: planned.
	a, err := PlanTopic(img, TopicSpec{Name: "big", Partitions: MaxPartitionsPerRequest, ReplicationFactor: 1})
	if err != nil || len(a) != MaxPartitionsPerRequest {
		t.Fatalf("at the cap: %d partitions, %v", len(a), err)
	}
}

func TestFSMBrokerBudget(t *testing.T) {
	tf := newTestFSM(t)
	epochs := tf.threeBrokersAt(SupportedMetadataVersions())
	// Below metadata.version 9 (MetadataVersionBrokerBudget) no budget can be recorded.
	tf.rejected(budget(1, epochs[1], 2), ErrUnsupportedVersion)
	tf.ok(featureLevel(MetadataVersionBrokerBudget))
	tf.rejected(budget(1, epochs[1]-1, 2), ErrStaleEpoch)
	tf.rejected(budget(9, 1, 2), ErrUnknownBroker)
	tf.rejected(budget(1, epochs[1], -1), ErrInvalidPartitions)
	tf.ok(budget(1, epochs[1], 3))

	tf.ok(createTopic("a", []int32{1, 2}, []int32{1, 3}))
	// Two more on broker 1 would make 4, over its 3: refused by the FSM
	// too (two creates planned on the same image), nothing written.
	tf.rejected(createTopic("b", []int32{1}, []int32{2, 1}), ErrPartitionBudget)
	err, _ := tf.apply(createTopic("b", []int32{1}, []int32{2, 1})).(error)
	if err == nil || !strings.Contains(err.Error(), "broker 1 would host 4 partition replicas (2 now, 2 more), over its max.partitions.per.broker of 3") {
		t.Fatalf("over budget: %v", err)
	}
	tf.ok(createTopic("b", []int32{1}, []int32{2, 3}))
	// Broker 2 has no budget (unknown): no limit.
	tf.ok(createTopic("c", []int32{2}, []int32{2}, []int32{2}))
	inc := &pb.Command{Cmd: &pb.Command_CreatePartitions{CreatePartitions: &pb.CreatePartitions{Topic: "c",
		Partitions: []*pb.PartitionAssignment{{Partition: 3, Replicas: []int32{1}, Leader: 1, Isr: []int32{1}}}}}}
	tf.rejected(inc, ErrPartitionBudget)

	// The budget outlives a restart of the broker (its new run reports
	// its own in its heartbeats) and of the store.
	e := tf.ok(registerVersions(1, "inc2", SupportedMetadataVersions())).(int64)
	if b, _ := tf.f.Image().Broker(1); b.MaxPartitions != 3 || b.Epoch != e {
		t.Fatalf("after re-registering: %+v", b)
	}
	if b, _ := tf.storedImage().Broker(1); b.MaxPartitions != 3 {
		t.Fatalf("stored: %+v", b)
	}
	if got := tf.f.Image().HostedReplicas(); got[1] != 3 || got[2] != 5 || got[3] != 2 {
		t.Fatalf("hosted replicas: %v", got)
	}
}

// The controller records the budget a broker's heartbeats report (once
// metadata.version allows) and refuses a create or an increase past it,
// naming the broker and the numbers, before anything is written.
func TestControllerRefusesBeyondBudget(t *testing.T) {
	c := newTestCluster(t, 1, 0, nil)
	n := c.waitController()
	ctx := context.Background()
	info := BrokerInfo{ID: 1, Incarnation: "a", Addr: "node1", MetadataVersions: SupportedMetadataVersions()}
	epoch, err := n.Ctl().RegisterBroker(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the budget recorded", func() bool {
		if err := n.Ctl().Heartbeat(ctx, 1, "a", epoch, 5); err != nil {
			t.Logf("heartbeat: %v", err)
		}
		b, _ := n.Image().Broker(1)
		return b.MaxPartitions == 5 && !b.Fenced
	})
	if _, err := n.Ctl().CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	before := n.Image().Index()
	_, err = n.Ctl().CreateTopic(ctx, TopicSpec{Name: "u", Partitions: 4, ReplicationFactor: 1})
	if !errors.Is(err, ErrPartitionBudget) || !strings.Contains(err.Error(), "broker 1 would host 7 partition replicas (3 now, 4 more), over its max.partitions.per.broker of 5") {
		t.Fatalf("create over budget: %v", err)
	}
	err = n.Ctl().CreatePartitions(ctx, "t", 6)
	if !errors.Is(err, ErrPartitionBudget) || !strings.Contains(err.Error(), "would host 6") {
		t.Fatalf("increase over budget: %v", err)
	}
	err = n.Ctl().CreatePartitions(ctx, "t", math.MaxInt32)
	if !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("increase to 2^31-1: %v", err)
	}
	if after := n.Image().Index(); after != before {
		t.Fatalf("refusals wrote to the log: index %d -> %d", before, after)
	}
	if err := n.Ctl().CreatePartitions(ctx, "t", 5); err != nil {
		t.Fatalf("increase to the budget: %v", err)
	}
	// A lower budget reported later is recorded too.
	if err := n.Ctl().Heartbeat(ctx, 1, "a", epoch, 4); err != nil {
		t.Fatal(err)
	}
	if b, _ := n.Image().Broker(1); b.MaxPartitions != 4 {
		t.Fatalf("budget after a lower report: %d", b.MaxPartitions)
	}
}
