package broker_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// DescribeProducers answers from the leader's producer state: each
// producer's epoch, last sequence, timestamp and last offset, on the
// partition it wrote only; bad input fails the call with what was wrong.
func TestAdminDescribeProducers(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "dp", 2, nil)
	pid := initProducer(t, c, -1, 0).ProducerId
	produce(t, c, "dp", 1, idemBatch(3, pid, 0, 0, "a"))
	if r := produce(t, c, "dp", 1, idemBatch(2, pid, 0, 3, "b")); r.GetError() != nil {
		t.Fatal(r.GetError())
	}
	resp, err := c.admin.DescribeProducers(ctxT(t), &quirev1.DescribeProducersRequest{Topic: "dp"})
	if err != nil {
		t.Fatal(err)
	}
	ps := resp.GetPartitions()
	if len(ps) != 2 || ps[0].GetPartition() != 0 || len(ps[0].GetProducers()) != 0 || ps[1].GetPartition() != 1 || len(ps[1].GetProducers()) != 1 {
		t.Fatalf("want no producer on 0 and one on 1: %v", ps)
	}
	p := ps[1].GetProducers()[0]
	if p.GetProducerId() != pid || p.GetProducerEpoch() != 0 || p.GetLastSequence() != 4 || p.GetLastOffset() != 4 || p.GetLastTimestampMs() != 1000 {
		t.Fatalf("producer %v, want id %d epoch 0, last sequence 4 at offset 4, timestamp 1000", p, pid)
	}

	_, err = c.admin.DescribeProducers(ctxT(t), &quirev1.DescribeProducersRequest{})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "topic name is empty")
	_, err = c.admin.DescribeProducers(ctxT(t), &quirev1.DescribeProducersRequest{Topic: "nope"})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, `"nope" does not exist`)
	_, err = c.admin.DescribeProducers(ctxT(t), &quirev1.DescribeProducersRequest{Topic: "dp", Partitions: []int32{0, 2}})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "partition 2", "has 2")
}
