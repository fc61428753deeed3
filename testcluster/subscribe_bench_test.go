package testcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/testcluster"
)

// BenchmarkSubscribeAcks reads 200,000 records of 100 B (3 partitions)
// over one Subscribe stream of a one-node in-process cluster, the client
// acknowledging in three ways, in one run so that they share its load:
//
//   - per-batch-500: the default credit (500 records) and an ack of each
//     batch as it comes: the broker has sent its whole credit by the time
//     the client answers, and waits a round trip for each batch;
//   - per-batch-5000: a credit of 5,000 and an ack of each batch: the
//     broker sends on while the acks of earlier batches travel;
//   - cumulative-5000: a credit of 5,000 and one ack per partition (its
//     last batch's next_offset, acknowledging all before it) every 1,000
//     records handled: the documented pattern.
//
// It reports records/s of each (rec/s), from the start to the last
// record read:
//
//	go test ./testcluster/ -run '^$' -bench BenchmarkSubscribeAcks -benchtime 1x -count 3
//
// On a 2-core VM under load 14-18: per-batch-500 0.57-1.17 M rec/s,
// per-batch-5000 1.10-1.71 M, cumulative-5000 1.00-1.89 M (the loopback
// round trip is short: the gap grows with the client's distance).
func BenchmarkSubscribeAcks(b *testing.B) {
	const (
		topic   = "subbench"
		parts   = 3
		records = 200_000
		perReq  = 2000
	)
	c := testcluster.New(b, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ctl := c.WaitController(ctx)
	if _, err := admin(c, ctl).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: topic,
		OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: parts}}); err != nil {
		b.Fatal(err)
	}
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic(topic)
		return ok && img.MetadataVersion() >= metadata.MetadataVersionProducerIDs
	})
	value := make([]byte, 100)
	pc := quirev1.NewProducerClient(c.Conn(ctl))
	for i := 0; i < records; i += perReq {
		req := &quirev1.ProduceRecordsRequest{Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1}}
		for j := range perReq {
			req.Records = append(req.Records, &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_ValueBytes{ValueBytes: value},
				OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: int32((i/perReq + j) % parts)}})
		}
		resp, err := pc.ProduceRecords(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range resp.Results {
			if r.Error != nil {
				b.Fatal(r.Error.Message)
			}
		}
	}
	gc := quirev1.NewGroupsClient(c.Conn(ctl))
	run := 0
	for _, v := range []struct {
		name       string
		credit     int32
		cumulative int // records handled between acks; 0: one ack per batch
	}{
		{"per-batch-500", 500, 0},
		{"per-batch-5000", 5000, 0},
		{"cumulative-5000", 5000, 1000},
	} {
		b.Run(v.name, func(b *testing.B) {
			var rate float64
			for range b.N {
				run++
				took, err := readGroup(ctx, gc, fmt.Sprintf("bench-%d", run), topic, records, v.credit, v.cumulative)
				if err != nil {
					b.Fatal(err)
				}
				rate = float64(records) / took.Seconds()
			}
			b.ReportMetric(rate, "rec/s")
		})
	}
}

// readGroup reads n records as a new member of group over one stream,
// acknowledging each batch or, with every > 0, cumulatively every that
// many records, and closes it; it returns how long the reading took.
func readGroup(ctx context.Context, gc quirev1.GroupsClient, group, topic string, n int, credit int32, every int) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := gc.Subscribe(ctx)
	if err != nil {
		return 0, err
	}
	if err := stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{
		Group: group, Subscription: &quirev1.GroupSubscription{Topics: []string{topic}}, Batches: true,
		MaxOutstandingRecords: credit, MaxOutstandingBytes: int64(credit) * 1024}}}); err != nil {
		return 0, err
	}
	start := time.Now()
	got, since := 0, 0
	pending := map[int32]int64{} // per partition, the last batch's next_offset not acknowledged
	ack := func() error {
		a := &quirev1.SubscribeAck{}
		for p, next := range pending {
			a.Partitions = append(a.Partitions, &quirev1.AckedOffsets{Topic: topic, Partition: p, NextOffset: next})
		}
		clear(pending)
		since = 0
		return stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: a}})
	}
	for got < n {
		resp, err := stream.Recv()
		if err != nil {
			return 0, fmt.Errorf("after %d records: %w", got, err)
		}
		batch := resp.GetBatch()
		if batch == nil {
			continue
		}
		got += len(batch.Records)
		since += len(batch.Records)
		pending[batch.Partition] = batch.NextOffset
		if every == 0 || since >= every {
			if err := ack(); err != nil {
				return 0, err
			}
		}
	}
	took := time.Since(start)
	if err := stream.CloseSend(); err != nil {
		return 0, err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	return took, nil
}
