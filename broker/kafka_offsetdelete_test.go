package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/metadata"
)

// franz-go's kadm DeleteOffsets (Kafka's OffsetDelete): the offsets of a
// topic a member of the group consumes stay (GROUP_SUBSCRIBED_TO_TOPIC),
// those of another topic go, an unknown topic is
// UNKNOWN_TOPIC_OR_PARTITION and an unknown group GROUP_ID_NOT_FOUND;
// once the member leaves, the subscribed topic's go too.
func TestBrokerKafkaDeleteOffsets(t *testing.T) {
	t.Parallel()
	b, addr := startKafkaBroker(t)
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionDeleteOffsets)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, addr))
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "oa", "ob"); err != nil {
		t.Fatal(err)
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "oa", Partition: 0, At: 1, LeaderEpoch: -1})
	offsets.Add(kadm.Offset{Topic: "ob", Partition: 0, At: 2, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "og", offsets); err != nil {
		t.Fatalf("commit: %v", err)
	}

	member := kafkaClient(t, addr, kgo.ConsumerGroup("og"), kgo.ConsumeTopics("oa"), kgo.DisableAutoCommit())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			if fs := member.PollFetches(ctx); fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
		}
	}()
	members := func() int {
		dg, err := adm.DescribeConsumerGroups(ctx, "og")
		if err != nil || dg["og"].Err != nil {
			return -1
		}
		return len(dg["og"].Members)
	}
	poll.True(t, "the member joins", func() bool { return members() == 1 })

	del, err := adm.DeleteOffsets(ctx, "og", kadm.TopicsSet{"oa": {0: {}}, "ob": {0: {}}, "onone": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(del["oa"][0], kerr.GroupSubscribedToTopic) || del["ob"][0] != nil || !errors.Is(del["onone"][0], kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete offsets: %v", del)
	}
	fetched, err := adm.FetchOffsets(ctx, "og")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("oa", 0); !ok || o.At != 1 {
		t.Fatalf("oa-0 after the refused deletion: %+v %v", o, ok)
	}
	if _, ok := fetched.Lookup("ob", 0); ok {
		t.Fatal("ob-0 still committed after its deletion")
	}
	if _, err := adm.DeleteOffsets(ctx, "onogroup", kadm.TopicsSet{"oa": {0: {}}}); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("unknown group: %v, want GROUP_ID_NOT_FOUND", err)
	}

	member.Close()
	<-polled
	poll.True(t, "the member leaves", func() bool { return members() == 0 })
	if del, err = adm.DeleteOffsets(ctx, "og", kadm.TopicsSet{"oa": {0: {}}}); err != nil || del["oa"][0] != nil {
		t.Fatalf("delete oa-0 of the empty group: %v %v", err, del)
	}
	if fetched, err = adm.FetchOffsets(ctx, "og"); err != nil || len(fetched) != 0 {
		t.Fatalf("offsets left: %v %v", err, fetched)
	}
}

// Groups.DeleteOffsets over gRPC answers as OffsetDelete does, each
// partition on its own, and a topic naming no partition stands for all
// of them.
func TestGroupsDeleteOffsets(t *testing.T) {
	t.Parallel()
	b, c := start(t)
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionDeleteOffsets)
	createTopic(t, c, "dx", 2, nil)
	createTopic(t, c, "dy", 1, nil)
	g := quirev1.NewGroupsClient(c.conn)
	ctx := ctxT(t)
	if _, err := g.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "dg", Offsets: []*quirev1.OffsetCommit{
		{Topic: "dx", Partition: 0, Offset: 1}, {Topic: "dx", Partition: 1, Offset: 2}, {Topic: "dy", Offset: 3}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: "dg", MemberId: "m",
		RebalanceTimeoutMs: 30_000, Subscription: &quirev1.GroupSubscription{Topics: []string{"dy"}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := g.DeleteOffsets(ctx, &quirev1.DeleteOffsetsRequest{Group: "dg", Topics: []*quirev1.DeleteOffsetsTopic{
		{Topic: "dx"}, {Topic: "dy", Partitions: []int32{0}}, {Topic: "dx", Partitions: []int32{7}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]quirev1.ErrorCode{}
	for _, p := range resp.Partitions {
		got[p.Topic+"/"+string(rune('0'+p.Partition))] = p.GetError().GetCode()
	}
	want := map[string]quirev1.ErrorCode{"dx/0": 0, "dx/1": 0, "dy/0": quirev1.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC,
		"dx/7": quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}
	if len(resp.Partitions) != 4 || len(got) != len(want) {
		t.Fatalf("results %v, want %v", resp.Partitions, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("results %v, want %v", got, want)
		}
	}
	fetched, err := g.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "dg"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fetched.Offsets) != 1 || fetched.Offsets[0].Topic != "dy" {
		t.Fatalf("offsets left %v, want dy-0 only", fetched.Offsets)
	}
	_, err = g.DeleteOffsets(ctx, &quirev1.DeleteOffsetsRequest{Group: "dnone", Topics: []*quirev1.DeleteOffsetsTopic{{Topic: "dx"}}})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_GROUP_ID_NOT_FOUND, "dnone")
}
