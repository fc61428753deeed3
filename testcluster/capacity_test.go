package testcluster_test

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterPartitionBudget: every node's budget reaches the metadata
// image; a topic that would push one broker past its budget is refused on
// whichever node it is asked, validate_only alike, naming that broker; an
// absurd count is refused with every node alive.
func TestClusterPartitionBudget(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Config(func(id int32, cfg *broker.Config) {
		cfg.MaxPartitionsPerBroker = 100
		if id == 2 {
			cfg.MaxPartitionsPerBroker = 6
		}
	}))
	ctx := testCtx(t)
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		for _, id := range c.IDs() {
			b, ok := img.Broker(id)
			if want := int32(100); id == 2 && (!ok || b.MaxPartitions != 6) || id != 2 && (!ok || b.MaxPartitions != want) {
				return false
			}
		}
		return true
	})
	rf := func(n int32) *quirev1.CreateTopicRequest_ReplicationFactor {
		return &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: n}
	}
	parts := func(n int32) *quirev1.CreateTopicRequest_Partitions {
		return &quirev1.CreateTopicRequest_Partitions{Partitions: n}
	}
	if _, err := admin(c, 1).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "a", OptionalPartitions: parts(4), OptionalReplicationFactor: rf(3)}); err != nil {
		t.Fatal(err)
	}
	// Each node checks on the image it serves from: wait until every one
	// holds topic a.
	for _, id := range c.IDs() {
		c.Eventually(ctx, "topic a on every node", func() error {
			_, err := admin(c, id).DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{"a"}})
			return err
		})
	}
	for _, id := range c.IDs() {
		for _, dry := range []bool{true, false} {
			_, err := admin(c, id).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "b", OptionalPartitions: parts(3),
				OptionalReplicationFactor: rf(3), ValidateOnly: dry})
			e := errorDetail(err)
			if status.Code(err) != codes.FailedPrecondition || e.GetCode() != quirev1.ErrorCode_POLICY_VIOLATION || e.GetRetriable() ||
				!strings.Contains(e.GetMessage(), "broker 2 would host 7 partition replicas (4 now, 3 more), over its max.partitions.per.broker of 6") {
				t.Fatalf("node %d validate_only=%v: %v (%v)", id, dry, err, e)
			}
		}
	}
	if _, err := admin(c, 3).CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "a", TotalCount: 7}); errorDetail(err).GetCode() != quirev1.ErrorCode_POLICY_VIOLATION {
		t.Fatalf("increase past broker 2's budget: %v", err)
	}
	// Replication factor 2 on a 3-node cluster still reaches broker 2 for
	// some partitions: within its budget for 2 partitions (4 + at most 2).
	if _, err := admin(c, 3).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "c", OptionalPartitions: parts(2), OptionalReplicationFactor: rf(2)}); err != nil {
		t.Fatal(err)
	}
	for _, id := range c.IDs() {
		_, err := admin(c, id).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "huge", OptionalPartitions: parts(math.MaxInt32)})
		if e := errorDetail(err); status.Code(err) != codes.InvalidArgument || e.GetCode() != quirev1.ErrorCode_INVALID_PARTITIONS {
			t.Fatalf("node %d, 2^31-1 partitions: %v", id, err)
		}
	}
	img := c.WaitIdenticalImages(ctx)
	if _, ok := img.Topic("b"); ok {
		t.Fatal("refused topic b exists")
	}
	if _, ok := img.Topic("huge"); ok {
		t.Fatal("refused topic huge exists")
	}
	if got := img.HostedReplicas()[2]; got > 6 {
		t.Fatalf("broker 2 hosts %d replicas, over its budget of 6", got)
	}
	// DescribeCluster shows each broker's replicas and budget.
	dc, err := admin(c, 3).DescribeCluster(ctx, &quirev1.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range dc.Brokers {
		want := int32(100)
		if b.Id == 2 {
			want = 6
		}
		if b.MaxPartitions != want || int(b.Partitions) != img.HostedReplicas()[b.Id] || b.Partitions < 4 {
			t.Fatalf("broker %d described with %d of %d partitions; the image has %d", b.Id, b.Partitions, b.MaxPartitions, img.HostedReplicas()[b.Id])
		}
	}
	for _, id := range c.IDs() {
		if _, err := admin(c, id).ListTopics(ctx, &quirev1.ListTopicsRequest{}); err != nil {
			t.Fatalf("node %d after the refusals: %v", id, err)
		}
	}
}
