package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/testcluster"
)

// BenchmarkReassignMove moves a one-partition topic of replication
// factor 2 holding 16 MiB between brokers 1,2 and 3,4 of a 4-node
// in-process cluster, back and forth: an operation is one whole move
// (both new replicas created, caught up, in the ISR, the old ones
// deleted), and MB/s the partition's bytes over its time. Unthrottled,
// and with replica.reassignment.throttle.bytes.per.second at 8 MiB/s:
// the ratio of the two is what the throttle costs a move (run them in
// the same invocation; absolute figures drift on a shared machine).
func BenchmarkReassignMove(b *testing.B) {
	for _, throttle := range []int64{0, 8 << 20} {
		b.Run(fmt.Sprintf("throttle=%d", throttle), func(b *testing.B) { benchReassignMove(b, throttle) })
	}
}

func benchReassignMove(b *testing.B, throttle int64) {
	c := testcluster.New(b, 4, testcluster.Voters(3))
	ctx := context.Background()
	c.WaitImage(ctx, func(img *metadata.Image) bool { return img.MetadataVersion() >= metadata.MetadataVersionReassignment })
	ad := admin(c, 1)
	if _, err := ad.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "bench-move",
		OptionalPartitions:        &quirev1.CreateTopicRequest_Partitions{Partitions: 1},
		OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 2}}); err != nil {
		b.Fatal(err)
	}
	move := func(to []int32) {
		if _, err := ad.AlterPartitionReassignments(ctx, &quirev1.AlterPartitionReassignmentsRequest{
			Partitions: []*quirev1.ReassignmentTarget{{Topic: "bench-move", Partition: 0, Replicas: to}}}); err != nil {
			b.Fatal(err)
		}
		c.WaitImage(ctx, func(img *metadata.Image) bool {
			p, _ := img.Partition("bench-move", 0)
			return !p.Reassigning() && slices.Equal(p.Replicas, to) && len(p.ISR) == len(to)
		})
	}
	pairs := [][]int32{{1, 2}, {3, 4}}
	move(pairs[0])
	leader, _ := c.WaitLeader(ctx, "bench-move", 0)
	bld := record.NewBuilder(record.None)
	value := make([]byte, 100)
	for range 1000 {
		bld.Append(1, nil, value, nil)
	}
	batch := bld.Build()
	const size = 16 << 20
	pr := quirev1.NewProducerClient(c.Conn(leader))
	for written := 0; written < size; written += len(batch) {
		resp, err := pr.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1}, TimeoutMs: 10000,
			Partitions: []*quirev1.PartitionRecords{{Topic: "bench-move", Records: append([]byte(nil), batch...)}}})
		if err != nil {
			b.Fatal(err)
		}
		if e := resp.Partitions[0].Error; e != nil {
			b.Fatal(e.Message)
		}
	}
	if throttle > 0 {
		if _, err := ad.SetReassignmentThrottle(ctx, &quirev1.SetReassignmentThrottleRequest{BytesPerSecond: throttle}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		move(pairs[(i+1)%2])
	}
}
