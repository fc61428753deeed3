package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// twoBrokers is metadata naming nodes 1 and 2 at their Kafka addresses.
func twoBrokers() *quirev1.GetMetadataResponse {
	return &quirev1.GetMetadataResponse{Brokers: []*quirev1.Broker{
		{Id: 1, Address: "host1:9093"}, {Id: 2, Address: "host2:9094", Rack: "r2"}}}
}

// TestKafkaLeaderHints (KIP-951): a partition refused as
// NOT_LEADER_OR_FOLLOWER names its leader and epoch (CurrentLeader), and
// a produce (v10+), share fetch and share acknowledge answer carries the
// leader's address; a partition answered, or one refused for another
// reason, names none.
func TestKafkaLeaderHints(t *testing.T) {
	t.Parallel()
	notLeader := &quirev1.Error{Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, Message: "led by 2", LeaderId: 2, LeaderEpoch: 7}
	backend := &fakeBackend{meta: twoBrokers(),
		produceResp: &quirev1.ProduceResponse{Partitions: []*quirev1.PartitionProduceResult{
			{Topic: "t", Partition: 0, BaseOffset: 41},
			{Topic: "t", Partition: 1, Error: notLeader},
		}},
		fetchResp: &quirev1.FetchResponse{Partitions: []*quirev1.FetchPartitionResult{
			{Topic: "t", Partition: 0, Error: notLeader},
		}}}
	_, k := startServer(t, backend)

	for _, version := range []int16{9, 10} {
		resp := roundTrip[*kmsg.ProduceResponse](k, produceReq(version, 0, 1))
		ps := resp.Topics[0].Partitions
		if c := ps[0].CurrentLeader; c.LeaderID != -1 || c.LeaderEpoch != -1 {
			t.Errorf("v%d: answered partition names leader %+v", version, c)
		}
		if version < 10 {
			if len(resp.Brokers) != 0 {
				t.Errorf("v%d: brokers %+v in a version without them", version, resp.Brokers)
			}
			continue
		}
		if c := ps[1].CurrentLeader; c.LeaderID != 2 || c.LeaderEpoch != 7 {
			t.Errorf("v%d: refused partition names leader %+v, want 2 at epoch 7", version, c)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Host != "host2" || resp.Brokers[0].Port != 9094 ||
			resp.Brokers[0].Rack == nil || *resp.Brokers[0].Rack != "r2" {
			t.Errorf("v%d: brokers %+v, want node 2 at host2:9094 in r2", version, resp.Brokers)
		}
	}

	fresp := roundTrip[*kmsg.FetchResponse](k, fetchReq(12, 0, 0))
	if c := fresp.Topics[0].Partitions[0].CurrentLeader; c.LeaderID != 2 || c.LeaderEpoch != 7 {
		t.Errorf("fetch: refused partition names leader %+v, want 2 at epoch 7", c)
	}

	sb := newShareBackend()
	sb.meta.Brokers = twoBrokers().Brokers
	sb.ledElsewhere = map[int32]int32{1: 2}
	_, sk := startServerConfig(t, Config{Backend: sb, MaxRequestBytes: 1 << 20, ShareGroups: true})
	sresp := roundTrip[*kmsg.ShareFetchResponse](sk, shareFetchReq("m", 0, 0, 1))
	if sresp.ErrorCode != 0 || len(sresp.Topics) != 1 || len(sresp.Topics[0].Partitions) != 2 {
		t.Fatalf("share fetch answered %+v", sresp)
	}
	for _, p := range sresp.Topics[0].Partitions {
		want := kmsg.ShareFetchResponseTopicPartitionCurrentLeader{LeaderID: -1, LeaderEpoch: -1}
		if p.Partition == 1 {
			want.LeaderID, want.LeaderEpoch = 2, 9
		}
		if p.CurrentLeader.LeaderID != want.LeaderID || p.CurrentLeader.LeaderEpoch != want.LeaderEpoch {
			t.Errorf("share fetch of partition %d names leader %+v, want %+v", p.Partition, p.CurrentLeader, want)
		}
	}
	if len(sresp.NodeEndpoints) != 1 || sresp.NodeEndpoints[0].NodeID != 2 || sresp.NodeEndpoints[0].Host != "host2" || sresp.NodeEndpoints[0].Port != 9094 {
		t.Errorf("share fetch node endpoints %+v, want node 2 at host2:9094", sresp.NodeEndpoints)
	}

	areq := kmsg.NewPtrShareAcknowledgeRequest()
	areq.Version = 1
	areq.GroupID, areq.MemberID, areq.ShareSessionEpoch = kmsg.StringPtr("g"), kmsg.StringPtr("m"), 1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = shareTopicID
	for _, p := range []int32{0, 1} {
		ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
		ap.Partition = p
		ap.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}
		at.Partitions = append(at.Partitions, ap)
	}
	areq.Topics = append(areq.Topics, at)
	aresp := roundTrip[*kmsg.ShareAcknowledgeResponse](sk, areq)
	if aresp.ErrorCode != 0 || len(aresp.Topics) != 1 || len(aresp.Topics[0].Partitions) != 2 {
		t.Fatalf("share acknowledge answered %+v", aresp)
	}
	for _, p := range aresp.Topics[0].Partitions {
		want := kmsg.ShareAcknowledgeResponseTopicPartitionCurrentLeader{LeaderID: -1, LeaderEpoch: -1}
		if p.Partition == 1 {
			want.LeaderID, want.LeaderEpoch = 2, 9
		}
		if p.CurrentLeader.LeaderID != want.LeaderID || p.CurrentLeader.LeaderEpoch != want.LeaderEpoch {
			t.Errorf("share acknowledge of partition %d names leader %+v, want %+v", p.Partition, p.CurrentLeader, want)
		}
	}
	if len(aresp.NodeEndpoints) != 1 || aresp.NodeEndpoints[0].NodeID != 2 || aresp.NodeEndpoints[0].Port != 9094 {
		t.Errorf("share acknowledge node endpoints %+v, want node 2 at host2:9094", aresp.NodeEndpoints)
	}
}
