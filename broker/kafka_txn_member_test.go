package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/metadata"
)

// TestBrokerKafkaTxnOffsetCommitFencedByGroup: TxnOffsetCommit v3+ sends
// a transaction's offsets as a consumer group member; over the Kafka
// listener they are refused from a member the group does not have
// (UNKNOWN_MEMBER_ID), at another generation (ILLEGAL_GENERATION), for a
// partition the member is not assigned (ILLEGAL_GENERATION), or naming a
// static member's instance with another member id (FENCED_INSTANCE_ID);
// from the member at its epoch they are staged, and committed with the
// transaction, as are those of a v2 request, which names no member. A
// classic (JoinGroup) member is held to its generation alike.
func TestBrokerKafkaTxnOffsetCommitFencedByGroup(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
	})
	addr, _ := b.ListenerAddr("KAFKA")
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionTransactions)
	c := dial(t, b)
	createTopic(t, c, "tin", 1, nil)
	createTopic(t, c, "tother", 1, nil)
	ctx := ctxT(t)

	// A static member of group tg, assigned tin-0.
	g := quirev1.NewGroupsClient(c.conn)
	hb := &quirev1.ConsumerGroupHeartbeatRequest{Group: "tg", MemberId: "m1", InstanceId: "i1", RebalanceTimeoutMs: 30_000,
		Subscription: &quirev1.GroupSubscription{Topics: []string{"tin"}}}
	resp, err := g.ConsumerGroupHeartbeat(ctx, hb)
	if err != nil {
		t.Fatal(err)
	}
	epoch := resp.MemberEpoch
	if a := resp.Assignment; a == nil || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 1 {
		t.Fatalf("member m1 assigned %v, want tin-0", a)
	}

	cl := kafkaClient(t, addr)
	init := kmsg.NewPtrInitProducerIDRequest()
	txnID := "tg-txn"
	init.TransactionalID, init.TransactionTimeoutMillis = &txnID, 30_000
	iresp, err := init.RequestWith(ctx, cl)
	if err != nil || iresp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v, %v", err, iresp)
	}
	for _, group := range []string{"tg", "tgc"} {
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, iresp.ProducerID, iresp.ProducerEpoch, group
		if aresp, err := add.RequestWith(ctx, cl); err != nil || aresp.ErrorCode != 0 {
			t.Fatalf("add offsets of %s to txn: %v, %v", group, err, aresp)
		}
	}
	commitTo := func(c *kgo.Client, group, member, instance string, gen int32, topic string, off int64) int16 {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, group, iresp.ProducerID, iresp.ProducerEpoch
		req.MemberID, req.Generation = member, gen
		if instance != "" {
			req.InstanceID = &instance
		}
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, off, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	commit := func(c *kgo.Client, member, instance string, gen int32, topic string, off int64) int16 {
		t.Helper()
		return commitTo(c, "tg", member, instance, gen, topic, off)
	}
	for _, tc := range []struct {
		what             string
		member, instance string
		gen              int32
		topic            string
		want             *kerr.Error
	}{
		{"an unknown member", "zz", "", epoch, "tin", kerr.UnknownMemberID},
		{"a stale generation", "m1", "i1", epoch - 1, "tin", kerr.IllegalGeneration},
		{"a generation ahead", "m1", "i1", epoch + 1, "tin", kerr.IllegalGeneration},
		{"a partition not assigned", "m1", "i1", epoch, "tother", kerr.IllegalGeneration},
		{"the instance under another member id", "m2", "i1", epoch, "tin", kerr.FencedInstanceID},
		{"the member at its generation", "m1", "i1", epoch, "tin", nil},
	} {
		got := commit(cl, tc.member, tc.instance, tc.gen, tc.topic, 7)
		if tc.want == nil && got != 0 || tc.want != nil && got != tc.want.Code {
			t.Errorf("%s: error code %d (%v), want %v", tc.what, got, kerr.ErrorForCode(got), tc.want)
		}
	}
	// A classic (JoinGroup) member of group tgc: its generation is what
	// it sends.
	join := kmsg.NewPtrJoinGroupRequest()
	instance := "ci"
	join.Group, join.ProtocolType, join.InstanceID = "tgc", "consumer", &instance
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30_000, 30_000
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"tin"}
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, proto)
	jresp, err := join.RequestWith(ctx, cl)
	if err != nil || jresp.ErrorCode != 0 {
		t.Fatalf("join group: %v, %v", err, jresp)
	}
	if got := commitTo(cl, "tgc", jresp.MemberID, instance, jresp.Generation-1, "tin", 5); got != kerr.IllegalGeneration.Code {
		t.Errorf("classic member at an old generation: error code %d (%v), want ILLEGAL_GENERATION", got, kerr.ErrorForCode(got))
	}
	if got := commitTo(cl, "tgc", jresp.MemberID, instance, jresp.Generation, "tin", 5); got != 0 {
		t.Errorf("classic member at its generation: error code %d (%v)", got, kerr.ErrorForCode(got))
	}
	// Before v3 a TxnOffsetCommit names no member: not checked.
	old := kafkaClient(t, addr, kgo.MaxVersions(kversion.V2_4_0()))
	if got := commit(old, "", "", -1, "tother", 9); got != 0 {
		t.Fatalf("v2 TxnOffsetCommit: error code %d (%v)", got, kerr.ErrorForCode(got))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, iresp.ProducerID, iresp.ProducerEpoch, true
	if eresp, err := end.RequestWith(ctx, cl); err != nil || eresp.ErrorCode != 0 {
		t.Fatalf("end txn: %v, %v", err, eresp)
	}
	fetch, err := g.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "tg", Partitions: []*quirev1.TopicPartition{
		{Topic: "tin", Partition: 0}, {Topic: "tother", Partition: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if o := fetch.Offsets; len(o) != 2 || o[0].Offset != 7 || o[1].Offset != 9 {
		t.Fatalf("committed %v, want tin-0 at 7 (the member's) and tother-0 at 9 (the v2 request's)", o)
	}
	classic, err := g.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "tgc", Partitions: []*quirev1.TopicPartition{{Topic: "tin", Partition: 0}}})
	if err != nil || len(classic.Offsets) != 1 || classic.Offsets[0].Offset != 5 {
		t.Fatalf("tgc committed %v, %v; want tin-0 at 5 (the classic member's)", classic, err)
	}
}
