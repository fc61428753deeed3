package testcluster_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// TestClusterIdempotentPlainGRPCRetryLoop: a plain gRPC client with a
// producer id from InitProducerId sends numbered records three at a time
// with ProduceRecords, through any node, and on any failure sends the very
// same request again (same sequences), while the partition's leader is
// killed and restarted twice and a 100 ms acks=all timeout forces retries
// of writes that did succeed. Afterwards the partition holds every record
// exactly once, in order, with no gap.
func TestClusterIdempotentPlainGRPCRetryLoop(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c.WaitController(ctx)
	const topic = "plain-idem"
	createTopicWith(t, c, 1, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	c.WaitLeader(ctx, topic, 0)
	var pid *quirev1.InitProducerIdResponse
	c.Eventually(ctx, "InitProducerId", func() error {
		var err error
		pid, err = quirev1.NewProducerClient(c.Conn(1)).InitProducerId(ctx, &quirev1.InitProducerIdRequest{})
		return err
	})

	next := 0   // the next record number, and its sequence
	tries := 0  // requests sent, retries included
	failed := 0 // of them, the ones answered with an error
	send := func(n int) {
		req := &quirev1.ProduceRecordsRequest{Topic: topic, TimeoutMs: 100,
			OptionalProducerId: &quirev1.ProduceRecordsRequest_ProducerId{ProducerId: pid.ProducerId},
			ProducerEpoch:      pid.ProducerEpoch, BaseSequence: int32(next)}
		for i := next; i < next+n; i++ {
			req.Records = append(req.Records, &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: strconv.Itoa(i)},
				OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 0}})
		}
		c.Eventually(ctx, fmt.Sprintf("records %d to %d", next, next+n-1), func() error {
			running := c.Running()
			via := running[tries%len(running)]
			tries++
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			resp, err := quirev1.NewProducerClient(c.Conn(via)).ProduceRecords(rctx, req)
			if err != nil {
				failed++
				return err
			}
			for i, r := range resp.Results {
				if r.Error != nil {
					if !r.Error.Retriable {
						t.Fatalf("records from %d through node %d: %v", next, via, r.Error)
					}
					failed++
					return fmt.Errorf("%v", r.Error)
				}
				if i > 0 && r.Offset != resp.Results[0].Offset+int64(i) {
					t.Fatalf("offsets of one request not contiguous: %v", resp.Results)
				}
			}
			return nil
		})
		next += n
	}
	for i := 0; i < 30; i++ {
		send(3)
	}
	for round := range 2 {
		victim, _ := c.WaitLeader(ctx, topic, 0)
		c.Kill(victim)
		for i := 0; i < 30; i++ {
			send(3)
		}
		c.Restart(victim)
		c.WaitImage(ctx, func(img *metadata.Image) bool {
			pi, ok := img.Partition(topic, 0)
			return ok && len(pi.ISR) == 3
		})
		for i := 0; i < 30; i++ {
			send(3)
		}
		t.Logf("round %d: node %d killed and back in the ISR", round, victim)
	}
	t.Logf("%d records in %d requests (%d answered with an error, then retried)", next, tries, failed)

	leader, _ := c.WaitLeader(ctx, topic, 0)
	var values []string
	for off := int64(0); len(values) < next; {
		resp, err := quirev1.NewConsumerClient(c.Conn(leader)).FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: topic, Offset: off, MaxWaitMs: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Records) == 0 {
			break
		}
		for _, r := range resp.Records {
			values = append(values, r.GetValue())
		}
		off = resp.NextOffset
	}
	if len(values) != next {
		t.Fatalf("the log holds %d records, %d were sent", len(values), next)
	}
	for i, v := range values {
		if v != strconv.Itoa(i) {
			t.Fatalf("offset %d holds record %s, want %d", i, v, i)
		}
	}
}
