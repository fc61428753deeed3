package testcluster_test

import (
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterAmbiguousProduceIsMarked: an acks=all produce its leader
// appended but could not replicate in time (the leader cut off from its
// followers) answers REQUEST_TIMED_OUT with outcome_unknown set: the
// records may be read later. A produce refused before the append (an acks
// value Kafka does not have) has it unset.
func TestClusterAmbiguousProduceIsMarked(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx := testCtx(t)
	createTopicWith(t, c, 1, "amb", 1, 3, map[string]string{"min.insync.replicas": "2"})
	leader, _ := c.WaitLeader(ctx, "amb", 0)
	c.Partition(leader)
	defer c.Heal()
	bld := record.NewBuilder(record.None)
	bld.Append(time.Now().UnixMilli(), nil, []byte("maybe"), nil)
	resp, err := quirev1.NewProducerClient(c.Conn(leader)).Produce(ctx, &quirev1.ProduceRequest{
		OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1}, TimeoutMs: 300,
		Partitions: []*quirev1.PartitionRecords{{Topic: "amb", Records: bld.Build()}}})
	if err != nil {
		t.Fatal(err)
	}
	e := resp.Partitions[0].GetError()
	if e.GetCode() != quirev1.ErrorCode_REQUEST_TIMED_OUT || !e.GetOutcomeUnknown() {
		t.Fatalf("acks=all cut off from the followers: %v, want REQUEST_TIMED_OUT with outcome_unknown", e)
	}
	_, err = quirev1.NewProducerClient(c.Conn(leader)).Produce(ctx, &quirev1.ProduceRequest{
		OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 2}, TimeoutMs: 300,
		Partitions: []*quirev1.PartitionRecords{{Topic: "amb", Records: bld.Build()}}})
	if e := errorDetail(err); e == nil || e.GetOutcomeUnknown() {
		t.Fatalf("a produce refused before the append: %v (%v), want outcome_unknown unset", err, e)
	}
}
