package broker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
)

// ShareGroupDescribe (77) on the Kafka listener, with kmsg: advertised
// with share groups on; a share group with a member joined by
// ShareGroupHeartbeat is Stable, the member with its epoch, subscription
// and every partition of its topic assigned; a group the node does not
// serve is GROUP_ID_NOT_FOUND, Dead.
func TestBrokerKafkaShareGroupDescribe(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
		c.GroupShareEnable = true
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, addr, kgo.DefaultProduceTopic("dq"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(av.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
		return k.ApiKey == 77 && k.MinVersion == 1 && k.MaxVersion == 1
	}) {
		t.Fatalf("ShareGroupDescribe 1-1 not advertised: %+v", av.ApiKeys)
	}

	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = "dg", "m-one", 0, []string{"dq"}
	hbResp, err := hb.RequestWith(ctx, cl)
	if err != nil || hbResp.ErrorCode != 0 {
		t.Fatalf("join: %v, %+v", err, hbResp)
	}

	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{"dg", "nosuch"}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 2 {
		t.Fatalf("%d groups described, want 2", len(resp.Groups))
	}
	g := resp.Groups[0]
	if g.ErrorCode != 0 || g.GroupID != "dg" || g.GroupState != "Stable" || g.Assignor != "simple" || len(g.Members) != 1 {
		t.Fatalf("dg described %+v", g)
	}
	m := g.Members[0]
	if m.MemberID != "m-one" || m.MemberEpoch != hbResp.MemberEpoch || g.GroupEpoch != hbResp.MemberEpoch ||
		!slices.Equal(m.SubscribedTopicNames, []string{"dq"}) {
		t.Errorf("member described %+v (group epoch %d), want m-one at epoch %d subscribed to dq", m, g.GroupEpoch, hbResp.MemberEpoch)
	}
	if tps := m.Assignment.TopicPartitions; len(tps) != 1 || tps[0].Topic != "dq" || tps[0].TopicID == [16]byte{} || !slices.Equal(tps[0].Partitions, []int32{0}) {
		t.Errorf("member assigned %+v, want dq (with its id) partition 0", tps)
	}
	if n := resp.Groups[1]; n.ErrorCode != kerr.GroupIDNotFound.Code || n.GroupState != "Dead" {
		t.Errorf("unknown group described %+v, want GROUP_ID_NOT_FOUND, Dead", n)
	}
}
