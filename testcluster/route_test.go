package testcluster_test

import (
	"fmt"
	"testing"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterAnyBrokerTakesPlainProducesAndFetches: a plain gRPC client
// may send a unary Produce, ProduceRecords or FetchRecords to a broker that
// does not lead the partition; that broker passes it on to the leader
// once. A request already passed on is not passed on again.
func TestClusterAnyBrokerTakesPlainProducesAndFetches(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	createReplicatedTopic(t, c, "routed")
	ctx := testCtx(t)
	leader, epoch := c.WaitLeader(ctx, "routed", 0)
	other := leader%3 + 1

	pr := quirev1.NewProducerClient(c.Conn(other))
	recs, err := pr.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{
		Topic: "routed", OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1},
		Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: "a"}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 0}}, {ValueData: &quirev1.ProduceRecord_Value{Value: "b"}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 0}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs.Results {
		if r.Error != nil || r.Offset != int64(i) {
			t.Fatalf("record %d through node %d: %+v", i, other, r)
		}
	}

	b := record.NewBuilder(record.None)
	b.Append(1, nil, []byte("c"), nil)
	resp, err := pr.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1},
		Partitions: []*quirev1.PartitionRecords{{Topic: "routed", Partition: 0, Records: b.Build()}}})
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Partitions[0]; p.Error != nil || p.BaseOffset != 2 || p.LastOffset != 2 {
		t.Fatalf("batch through node %d: %+v", other, p)
	}

	got, err := quirev1.NewConsumerClient(c.Conn(other)).FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "routed", Offset: 0})
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, r := range got.Records {
		values = append(values, r.GetValue())
	}
	if len(values) != 3 || values[0] != "a" || values[2] != "c" || got.HighWatermark != 3 {
		t.Fatalf("fetched through node %d: %v, hw %d", other, values, got.HighWatermark)
	}

	// Passed on already: answered with the leader's name instead.
	fctx := asForwarded(ctx)
	recs, err = pr.ProduceRecords(fctx, &quirev1.ProduceRecordsRequest{
		Topic: "routed", Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: "x"}, OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 0}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e := recs.Results[0].Error; e == nil || e.Code != quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER || e.LeaderId != leader || e.LeaderEpoch != epoch {
		t.Fatalf("a forwarded produce at a non-leader: %+v", recs.Results[0])
	}
	if _, err := quirev1.NewConsumerClient(c.Conn(other)).FetchRecords(fctx, &quirev1.FetchRecordsRequest{Topic: "routed"}); errorDetail(err).GetCode() != quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER {
		t.Fatalf("a forwarded fetch at a non-leader: %v", err)
	}
}

// TestClusterPassedOnProduceOutcomes: through a broker that does not lead
// the partition, acks=0 reports no offsets; an acks=all the leader cannot
// complete in time is REQUEST_TIMED_OUT (the record may be there), not
// NOT_LEADER (which would invite writing it again at the leader); a fetch
// of more than gRPC's default 4 MiB comes back whole. One voter: the
// controller stays off the link cut below (an election cannot move it
// there), so that the cut holds the HW back and does nothing else (with
// the controller at one end, the other end's session would expire).
func TestClusterPassedOnProduceOutcomes(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3, testcluster.Voters(1))
	ctx := testCtx(t)
	ctl := c.WaitController(ctx)
	const topic = "outcomes"
	if _, err := admin(c, ctl).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: topic,
		OptionalPartitions:        &quirev1.CreateTopicRequest_Partitions{Partitions: 3},
		OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 3},
		Configs:                   map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	// A partition the controller does not lead: requests go through the
	// controller, and the third node is the follower cut off.
	part, leader := int32(-1), int32(-1)
	for p := int32(0); p < 3 && part < 0; p++ {
		if l, _ := c.WaitLeader(ctx, topic, p); l != ctl {
			part, leader = p, l
		}
	}
	if part < 0 {
		t.Skipf("the controller %d leads every partition", ctl)
	}
	via, cut := ctl, int32(-1)
	for _, id := range c.IDs() {
		if id != ctl && id != leader {
			cut = id
		}
	}
	pr := quirev1.NewProducerClient(c.Conn(via))
	record := func(r *quirev1.ProduceRecord) []*quirev1.ProduceRecord {
		r.OptionalPartition = &quirev1.ProduceRecord_Partition{Partition: part}
		return []*quirev1.ProduceRecord{r}
	}

	recs, err := pr.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: 0},
		Records: record(&quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: "fire and forget"}})})
	if err != nil {
		t.Fatal(err)
	}
	if r := recs.Results[0]; r.Error != nil || r.Offset != -1 {
		t.Fatalf("acks=0 through node %d: %+v; want no error and offset -1", via, r)
	}

	// Big records, replicated, for the fetch below (acks=all: every
	// replica has them before the follower is cut off). A retriable
	// refusal is retried; one of unknown outcome may leave a record twice,
	// so the fetch is checked against the high watermark.
	const bigRecords = 12
	for i := range bigRecords { // one per request: a batch stays under max.message.bytes
		c.Eventually(ctx, fmt.Sprintf("big record %d acknowledged", i), func() error {
			recs, err := pr.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1},
				Records: record(&quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_ValueBytes{ValueBytes: make([]byte, 512<<10)}})})
			if err != nil {
				return err
			}
			if e := recs.Results[0].Error; e != nil {
				if !e.Retriable {
					t.Fatalf("big record %d: %v", i, e)
				}
				return fmt.Errorf("%v", e)
			}
			return nil
		})
	}
	got, err := quirev1.NewConsumerClient(c.Conn(via)).FetchRecords(ctx, &quirev1.FetchRecordsRequest{
		Topic: topic, Partition: part, Offset: 1, MaxRecords: 100, MaxBytes: 16 << 20}, grpc.MaxCallRecvMsgSize(64<<20))
	if err != nil {
		t.Fatalf("fetch of 6 MiB through node %d: %v", via, err)
	}
	if n := int64(len(got.Records)); n < bigRecords || n != got.HighWatermark-1 {
		t.Fatalf("fetched %d records through node %d, want the %d (at least %d) below the high watermark", n, via, got.HighWatermark-1, bigRecords)
	}

	// An in-sync follower cut off from the leader holds the HW until it
	// leaves the ISR (after replica.lag.time.max.ms): acks=all times out.
	c.Partition(cut, leader)
	defer c.Heal()
	recs, err = pr.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1}, TimeoutMs: 600,
		Records: record(&quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: "slow"}})})
	if err != nil {
		t.Fatal(err)
	}
	if e := recs.Results[0].Error; e == nil || e.Code != quirev1.ErrorCode_REQUEST_TIMED_OUT || !e.Retriable {
		t.Fatalf("acks=all through node %d with follower %d cut off: %+v; want REQUEST_TIMED_OUT", via, cut, recs.Results[0])
	}
}
