package testcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterKafkaOffsetForLeaderEpochAfterLeaderChange: after the leader
// of a partition is killed, the new leader answers OffsetForLeaderEpoch
// (KIP-320) as Kafka: the old epoch ends where the new one starts (the
// records the old leader had acknowledged), a client still at the old
// epoch is FENCED_LEADER_EPOCH; and franz-go, consuming across the
// change (it validates its position with OffsetForLeaderEpoch when the
// leader epoch moves), reads every record once, in order.
func TestClusterKafkaOffsetForLeaderEpochAfterLeaderChange(t *testing.T) {
	t.Parallel()
	c, addrs := kafkaCluster(t, 3)
	createTopic(t, c, 1, "ke", 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	oldLeader, oldEpoch := c.WaitLeader(ctx, "ke", 0)
	var seed string
	for id, a := range addrs {
		if id != oldLeader {
			seed = a
		}
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("ke"), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var sent []string
	send := func(round string) {
		t.Helper()
		var recs []*kgo.Record
		for i := range 50 {
			v := fmt.Sprintf("%s-%d", round, i)
			recs = append(recs, &kgo.Record{Value: []byte(v)})
			sent = append(sent, v)
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", round, err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"ke": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	consume := func(n int) {
		t.Helper()
		for len(got) < n {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records: %v", len(got), n, ctx.Err())
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Logf("consume: %v", err) })
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
	}
	send("before")
	consume(50)

	c.Kill(oldLeader)
	var newLeader, newEpoch int32
	c.Eventually(ctx, "a new leader of ke-0", func() error {
		newLeader, newEpoch = c.WaitLeader(ctx, "ke", 0)
		if newLeader == oldLeader || newEpoch <= oldEpoch {
			return fmt.Errorf("leader %d at epoch %d", newLeader, newEpoch)
		}
		return nil
	})
	send("after")
	consume(100)
	if fmt.Sprint(got) != fmt.Sprint(sent) {
		t.Fatalf("read %d records across the leader change, want the %d sent in order; first: %v", len(got), len(sent), got[:min(5, len(got))])
	}

	ask := func(current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		var p kmsg.OffsetForLeaderEpochResponseTopicPartition
		c.Eventually(ctx, "OffsetForLeaderEpoch at the new leader", func() error {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.ReplicaID = -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = "ke"
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, current, epoch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, prod) // sent to the leader
			if err != nil {
				return err
			}
			p = resp.Topics[0].Partitions[0]
			if p.ErrorCode == kerr.NotLeaderForPartition.Code {
				return fmt.Errorf("not the leader yet")
			}
			return nil
		})
		return p
	}
	if p := ask(newEpoch, oldEpoch); p.ErrorCode != 0 || p.LeaderEpoch != oldEpoch || p.EndOffset != 50 {
		t.Fatalf("the old epoch %d at the new leader: %+v, want it to end at 50", oldEpoch, p)
	}
	if p := ask(newEpoch, newEpoch); p.ErrorCode != 0 || p.LeaderEpoch != newEpoch || p.EndOffset != 100 {
		t.Fatalf("the new epoch %d: %+v, want it to end at the log end, 100", newEpoch, p)
	}
	if p := ask(oldEpoch, oldEpoch); p.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("a client at the old epoch: %+v, want FENCED_LEADER_EPOCH", p)
	}
}
