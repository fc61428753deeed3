package main

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// claimRecords returns a copy of batch (one RecordBatch v2) whose header
// claims n records (and a last offset delta to match), its CRC made
// right again, so only the count lies.
func claimRecords(batch []byte, n int32) []byte {
	b := append([]byte(nil), batch...)
	binary.BigEndian.PutUint32(b[23:], uint32(n-1)) // lastOffsetDelta
	binary.BigEndian.PutUint32(b[57:], uint32(n))   // records count
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// claimLength returns a copy of batch whose batch length says n bytes.
func claimLength(batch []byte, n int32) []byte {
	b := append([]byte(nil), batch...)
	binary.BigEndian.PutUint32(b[8:], uint32(n))
	return b
}

// grpcHostile sends well-formed requests carrying values no node should
// take: bad names, negative and huge sizes and counts, oversized fields,
// unknown enum values, huge partition counts.
func (s *sweep) grpcHostile(ctx context.Context) {
	admin := quirev1.NewAdminClient(s.conn)
	prod := quirev1.NewProducerClient(s.conn)
	cons := quirev1.NewConsumerClient(s.conn)
	meta := quirev1.NewMetadataClient(s.conn)
	groups := quirev1.NewGroupsClient(s.conn)
	sec := quirev1.NewSecurityClient(s.conn)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()

	long := strings.Repeat("t", 250)
	huge := strings.Repeat("h", 100<<10)
	mib := strings.Repeat("m", 1<<20)
	good := batch(3, "hostile")
	inv := codes.InvalidArgument
	parts := func(n int32) *quirev1.CreateTopicRequest_Partitions {
		return &quirev1.CreateTopicRequest_Partitions{Partitions: n}
	}
	rf := func(n int32) *quirev1.CreateTopicRequest_ReplicationFactor {
		return &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: n}
	}
	create := func(req *quirev1.CreateTopicRequest) error { _, err := admin.CreateTopic(ctx, req); return err }
	for _, c := range []struct {
		name string
		req  *quirev1.CreateTopicRequest
		want []codes.Code
	}{
		{"name a/b", &quirev1.CreateTopicRequest{Name: "a/b"}, []codes.Code{inv}},
		{"empty name", &quirev1.CreateTopicRequest{Name: ""}, []codes.Code{inv}},
		{"name ..", &quirev1.CreateTopicRequest{Name: ".."}, []codes.Code{inv}},
		{"name of 250 bytes", &quirev1.CreateTopicRequest{Name: long}, []codes.Code{inv}},
		{"name of 100 KiB", &quirev1.CreateTopicRequest{Name: huge}, []codes.Code{inv}},
		{"name with é", &quirev1.CreateTopicRequest{Name: "caf\u00e9"}, []codes.Code{inv}},
		{"name with NUL", &quirev1.CreateTopicRequest{Name: "a\x00b"}, []codes.Code{inv}},
		{"request id with a newline", &quirev1.CreateTopicRequest{Name: "hx", RequestId: "retry\n1"}, []codes.Code{inv}},
		{"request id with é", &quirev1.CreateTopicRequest{Name: "hx", RequestId: "caf\u00e9"}, []codes.Code{inv}},
		{"request id of 100 KiB", &quirev1.CreateTopicRequest{Name: "hx", RequestId: huge}, []codes.Code{inv}},
		{"partitions -1", &quirev1.CreateTopicRequest{Name: "hx", OptionalPartitions: parts(-1)}, []codes.Code{inv}},
		{"partitions 0", &quirev1.CreateTopicRequest{Name: "hx", OptionalPartitions: parts(0)}, []codes.Code{inv}},
		{"replication factor 0", &quirev1.CreateTopicRequest{Name: "hx", OptionalReplicationFactor: rf(0)}, []codes.Code{inv}},
		{"replication factor 40000", &quirev1.CreateTopicRequest{Name: "hx", OptionalReplicationFactor: rf(40000)}, []codes.Code{inv}},
		{"replication factor 5 on one broker", &quirev1.CreateTopicRequest{Name: "hx", OptionalReplicationFactor: rf(5)}, []codes.Code{inv}},
		{"unknown config key", &quirev1.CreateTopicRequest{Name: "hx", Configs: map[string]string{"no.such.key": "1"}}, []codes.Code{inv}},
		{"config value of 1 MiB", &quirev1.CreateTopicRequest{Name: "hx", Configs: map[string]string{"retention.ms": mib}}, []codes.Code{inv}},
		{"config key of 100 KiB", &quirev1.CreateTopicRequest{Name: "hx", Configs: map[string]string{huge: "1"}}, []codes.Code{inv}},
		{"config value not a number", &quirev1.CreateTopicRequest{Name: "hx", Configs: map[string]string{"segment.bytes": "-99999999999999999999"}}, []codes.Code{inv}},
	} {
		o, d := refusal(create(c.req), c.want...)
		s.report("grpc CreateTopic "+c.name, o, d)
	}

	// A refusal echoing a huge value reaches a client with gRPC C-core's
	// 8 KiB header limit (Python's) as the refusal itself.
	if small, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithMaxHeaderListSize(8<<10)); err == nil {
		_, err := quirev1.NewAdminClient(small).CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "hx",
			Configs: map[string]string{"cleanup.policy": strings.Repeat("\u00e9", 4096), "retention.ms": mib}})
		o, d := refusal(err, inv)
		s.report("grpc CreateTopic huge config values, 8 KiB header client", o, d)
		_ = small.Close()
	}

	// 2^31-1 partitions. The dry run first: it must be refused as the real
	// request is (INVALID_PARTITIONS, over the per-request cap). Were it
	// answered OK, the real request might have the controller place 2^31
	// partitions, which no node survives, so it is then not sent and the
	// case fails.
	for _, c := range []struct {
		name string
		dry  func() error
		real func() error
	}{
		{"CreateTopic partitions=2147483647",
			func() error {
				return create(&quirev1.CreateTopicRequest{Name: "hbig", OptionalPartitions: parts(math.MaxInt32), ValidateOnly: true})
			},
			func() error {
				return create(&quirev1.CreateTopicRequest{Name: "hbig", OptionalPartitions: parts(math.MaxInt32)})
			}},
		{"CreatePartitions total_count=2147483647",
			func() error {
				_, err := admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: keptTopic, TotalCount: math.MaxInt32, ValidateOnly: true})
				return err
			},
			func() error {
				_, err := admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: keptTopic, TotalCount: math.MaxInt32})
				return err
			}},
	} {
		err := c.dry()
		if err == nil {
			s.report("grpc "+c.name+" validate_only", fail, "answered OK: the real request is not sent")
			continue
		}
		o, d := refusal(err)
		s.report("grpc "+c.name+" validate_only", o, d)
		o, d = refusal(c.real())
		s.report("grpc "+c.name, o, d)
	}

	wholeCases := []struct {
		name string
		call func() error
		want []codes.Code // nil: any clear refusal
		may  bool         // the call may also succeed
	}{
		{"CreatePartitions fewer than now", func() error {
			_, err := admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: keptTopic, TotalCount: 1})
			return err
		}, []codes.Code{inv}, false},
		{"CreatePartitions total_count -5", func() error {
			_, err := admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: keptTopic, TotalCount: -5})
			return err
		}, []codes.Code{inv}, false},
		{"CreatePartitions topic a/b", func() error {
			_, err := admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "a/b", TotalCount: 3})
			return err
		}, []codes.Code{inv}, false},
		{"DeleteTopic a/b", func() error { _, err := admin.DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: "a/b"}); return err }, []codes.Code{inv}, false},
		{"DeleteTopic empty name", func() error { _, err := admin.DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: ""}); return err }, []codes.Code{inv}, false},
		{"DeleteTopic name of 100 KiB", func() error { _, err := admin.DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: huge}); return err }, []codes.Code{inv}, false},
		{"DescribeTopics bad and huge names", func() error {
			_, err := admin.DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{"a/b", huge, ""}})
			return err
		}, nil, true},
		{"DescribeConfigs topic a/b", func() error {
			_, err := admin.DescribeConfigs(ctx, &quirev1.DescribeConfigsRequest{Topic: "a/b"})
			return err
		}, []codes.Code{inv}, false},
		{"AlterConfigs unknown key", func() error {
			_, err := admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: keptTopic, Set: map[string]string{"no.such.key": "1"}, ValidateOnly: true})
			return err
		}, []codes.Code{inv}, false},
		{"AlterConfigs value of 1 MiB", func() error {
			_, err := admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: keptTopic, Set: map[string]string{"retention.ms": mib}, ValidateOnly: true})
			return err
		}, []codes.Code{inv}, false},
		{"AlterConfigs negative segment.bytes", func() error {
			_, err := admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: keptTopic, Set: map[string]string{"segment.bytes": "-1"}, ValidateOnly: true})
			return err
		}, []codes.Code{inv}, false},
		{"DeleteRecords offset -5", func() error {
			_, err := admin.DeleteRecords(ctx, &quirev1.DeleteRecordsRequest{Partitions: []*quirev1.DeleteRecordsPartition{{Topic: keptTopic, Offset: -5}}})
			return err
		}, []codes.Code{inv}, false},
		{"DeleteRecords no partitions", func() error {
			_, err := admin.DeleteRecords(ctx, &quirev1.DeleteRecordsRequest{})
			return err
		}, []codes.Code{inv}, false},
		{"DescribeProducers topic a/b", func() error {
			_, err := admin.DescribeProducers(ctx, &quirev1.DescribeProducersRequest{Topic: "a/b"})
			return err
		}, []codes.Code{inv}, false},
		{"DescribeProducers partition -1", func() error {
			_, err := admin.DescribeProducers(ctx, &quirev1.DescribeProducersRequest{Topic: keptTopic, Partitions: []int32{-1}})
			return err
		}, []codes.Code{inv}, false},
		{"UnregisterBroker -1", func() error {
			_, err := admin.UnregisterBroker(ctx, &quirev1.UnregisterBrokerRequest{BrokerId: -1})
			return err
		}, nil, false},
		{"UnregisterBroker 2147483647", func() error {
			_, err := admin.UnregisterBroker(ctx, &quirev1.UnregisterBrokerRequest{BrokerId: math.MaxInt32})
			return err
		}, nil, false},
		{"UpdateFeatures metadata_version 2147483647", func() error {
			_, err := admin.UpdateFeatures(ctx, &quirev1.UpdateFeaturesRequest{MetadataVersion: math.MaxInt32})
			return err
		}, nil, false},
		{"UpdateFeatures metadata_version -1", func() error {
			_, err := admin.UpdateFeatures(ctx, &quirev1.UpdateFeaturesRequest{MetadataVersion: -1})
			return err
		}, nil, false},
		{"Produce no partitions", func() error { _, err := prod.Produce(ctx, &quirev1.ProduceRequest{}); return err }, []codes.Code{inv}, false},
		{"Produce acks 7", func() error {
			_, err := prod.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 7},
				Partitions: []*quirev1.PartitionRecords{{Topic: keptTopic, Records: good}}})
			return err
		}, []codes.Code{inv}, false},
		{"ProduceRecords no records", func() error {
			_, err := prod.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: keptTopic})
			return err
		}, []codes.Code{inv}, false},
		{"ProduceRecords topic a/b", func() error {
			_, err := prod.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: "a/b", Records: []*quirev1.ProduceRecord{{}}})
			return err
		}, []codes.Code{inv}, false},
		{"ProduceRecords partition 2147483647", func() error {
			_, err := prod.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: keptTopic, Records: []*quirev1.ProduceRecord{
				{OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: math.MaxInt32}}}})
			return err
		}, []codes.Code{inv}, false},
		{"InitProducerId producer_id -7 epoch -5", func() error {
			_, err := prod.InitProducerId(ctx, &quirev1.InitProducerIdRequest{OptionalProducerId: &quirev1.InitProducerIdRequest_ProducerId{ProducerId: -7}, ProducerEpoch: -5})
			return err
		}, nil, true},
		{"Fetch no partitions", func() error { _, err := cons.Fetch(ctx, &quirev1.FetchRequest{}); return err }, []codes.Code{inv}, false},
		{"Fetch max_bytes -1", func() error {
			_, err := cons.Fetch(ctx, &quirev1.FetchRequest{MaxBytes: -1, Partitions: []*quirev1.FetchPartition{{Topic: keptTopic}}})
			return err
		}, []codes.Code{inv}, false},
		{"Fetch min_bytes -1", func() error {
			_, err := cons.Fetch(ctx, &quirev1.FetchRequest{MinBytes: -1, Partitions: []*quirev1.FetchPartition{{Topic: keptTopic}}})
			return err
		}, []codes.Code{inv}, false},
		{"Fetch max_wait_ms -1", func() error {
			_, err := cons.Fetch(ctx, &quirev1.FetchRequest{MaxWaitMs: -1, Partitions: []*quirev1.FetchPartition{{Topic: keptTopic}}})
			return err
		}, []codes.Code{inv}, false},
		{"Fetch partition max_bytes -2147483648", func() error {
			_, err := cons.Fetch(ctx, &quirev1.FetchRequest{MinBytes: 1, MaxWaitMs: 60000, Partitions: []*quirev1.FetchPartition{{Topic: keptTopic, MaxBytes: math.MinInt32}}})
			return err
		}, []codes.Code{inv}, false},
		{"Fetch max_bytes 2147483647", func() error {
			_, err := cons.Fetch(ctx, &quirev1.FetchRequest{MaxBytes: math.MaxInt32, Partitions: []*quirev1.FetchPartition{{Topic: keptTopic, MaxBytes: math.MaxInt32}}})
			return err
		}, nil, true},
		{"FetchRecords max_bytes -1 (would wait)", func() error {
			_, err := cons.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: keptTopic, MaxBytes: -1, MaxWaitMs: 60000})
			return err
		}, []codes.Code{inv}, false},
		{"FetchRecords max_records -1", func() error {
			_, err := cons.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: keptTopic, MaxRecords: -1})
			return err
		}, []codes.Code{inv}, false},
		{"FetchRecords max_wait_ms -1", func() error {
			_, err := cons.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: keptTopic, MaxWaitMs: -1})
			return err
		}, []codes.Code{inv}, false},
		{"FetchRecords format 99", func() error {
			_, err := cons.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: keptTopic, Format: 99})
			return err
		}, []codes.Code{inv}, false},
		{"FetchRecords topic a/b", func() error {
			_, err := cons.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "a/b"})
			return err
		}, []codes.Code{inv}, false},
		{"FetchRecords offset -1", func() error {
			_, err := cons.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: keptTopic, Offset: -1})
			return err
		}, nil, false},
		{"FetchRecords max_records 2147483647", func() error {
			_, err := cons.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: keptTopic, MaxRecords: math.MaxInt32, MaxBytes: math.MaxInt32})
			return err
		}, nil, true},
		{"FetchRecordsMulti no partitions", func() error {
			_, err := cons.FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{})
			return err
		}, []codes.Code{inv}, false},
		{"FetchRecordsMulti partition twice", func() error {
			_, err := cons.FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{Partitions: []*quirev1.FetchRecordsPartition{{Topic: keptTopic}, {Topic: keptTopic}}})
			return err
		}, []codes.Code{inv}, false},
		{"FetchRecordsMulti format 7", func() error {
			_, err := cons.FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{Format: 7, Partitions: []*quirev1.FetchRecordsPartition{{Topic: keptTopic}}})
			return err
		}, []codes.Code{inv}, false},
		{"FetchRecordsMulti max_records -1", func() error {
			_, err := cons.FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{MaxRecords: -1, Partitions: []*quirev1.FetchRecordsPartition{{Topic: keptTopic}}})
			return err
		}, []codes.Code{inv}, false},
		{"ListOffsets no partitions", func() error { _, err := cons.ListOffsets(ctx, &quirev1.ListOffsetsRequest{}); return err }, []codes.Code{inv}, false},
		{"GetMetadata bad and huge names", func() error {
			_, err := meta.GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{"a/b", huge}})
			return err
		}, nil, true},
		{"CommitOffsets empty group", func() error {
			_, err := groups.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Offsets: []*quirev1.OffsetCommit{{Topic: keptTopic, Offset: 1}}})
			return err
		}, []codes.Code{inv}, false},
		{"CommitOffsets group of 100 KiB", func() error {
			_, err := groups.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: huge, Offsets: []*quirev1.OffsetCommit{{Topic: keptTopic, Offset: 1}}})
			return err
		}, []codes.Code{inv}, false},
		{"CommitOffsets group with NUL", func() error {
			_, err := groups.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "g\x00", Offsets: []*quirev1.OffsetCommit{{Topic: keptTopic, Offset: 1}}})
			return err
		}, []codes.Code{inv}, false},
		{"CommitOffsets offset -1", func() error {
			_, err := groups.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "hg", Offsets: []*quirev1.OffsetCommit{{Topic: keptTopic, Offset: -1}}})
			return err
		}, []codes.Code{inv}, false},
		{"CommitOffsets metadata of 1 MiB", func() error {
			_, err := groups.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "hg", Offsets: []*quirev1.OffsetCommit{{Topic: keptTopic, Offset: 1, Metadata: mib}}})
			return err
		}, []codes.Code{inv}, false},
		{"CommitOffsets 20000 offsets", func() error {
			offs := make([]*quirev1.OffsetCommit, 20000)
			for i := range offs {
				offs[i] = &quirev1.OffsetCommit{Topic: keptTopic, Partition: int32(i), Offset: 1}
			}
			_, err := groups.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "hg", Offsets: offs})
			return err
		}, []codes.Code{inv}, false},
		{"CommitOffsets no offsets", func() error {
			_, err := groups.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "hg"})
			return err
		}, []codes.Code{inv}, false},
		{"FetchOffsets empty group", func() error {
			_, err := groups.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{})
			return err
		}, []codes.Code{inv}, false},
		{"FetchOffsets partition -1", func() error {
			_, err := groups.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "hg", Partitions: []*quirev1.TopicPartition{{Topic: keptTopic, Partition: -1}}})
			return err
		}, []codes.Code{inv}, false},
		{"DeleteGroup empty group", func() error { _, err := groups.DeleteGroup(ctx, &quirev1.DeleteGroupRequest{}); return err }, nil, false},
		{"DescribeGroup group of 100 KiB", func() error {
			_, err := groups.DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: huge})
			return err
		}, nil, true},
		{"ResetOffsets no target", func() error {
			_, err := groups.ResetOffsets(ctx, &quirev1.ResetOffsetsRequest{Group: "hg", DryRun: true})
			return err
		}, []codes.Code{inv}, false},
		{"ResetOffsets offset -9", func() error {
			_, err := groups.ResetOffsets(ctx, &quirev1.ResetOffsetsRequest{Group: "hg", Topics: []string{keptTopic}, To: &quirev1.ResetOffsetsRequest_Offset{Offset: -9}, DryRun: true})
			return err
		}, []codes.Code{inv}, false},
		{"ConsumerGroupHeartbeat empty group", func() error {
			_, err := groups.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{MemberId: "m", Subscription: &quirev1.GroupSubscription{Topics: []string{keptTopic}}})
			return err
		}, []codes.Code{inv}, false},
		{"ConsumerGroupHeartbeat topic a/b", func() error {
			_, err := groups.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: "hg", MemberId: "m", RebalanceTimeoutMs: 1000,
				Subscription: &quirev1.GroupSubscription{Topics: []string{"a/b"}}})
			return err
		}, []codes.Code{inv}, false},
		{"ConsumerGroupHeartbeat regex (", func() error {
			_, err := groups.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: "hg", MemberId: "m", Subscription: &quirev1.GroupSubscription{Regex: "("}})
			return err
		}, []codes.Code{inv}, false},
		{"ConsumerGroupHeartbeat member epoch -7", func() error {
			_, err := groups.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: "hg", MemberId: "m", MemberEpoch: -7})
			return err
		}, nil, false},
		{"ConsumerGroupHeartbeat rebalance_timeout_ms -1", func() error {
			_, err := groups.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: "hg", MemberId: "m", RebalanceTimeoutMs: -1,
				Subscription: &quirev1.GroupSubscription{Topics: []string{keptTopic}}})
			return err
		}, []codes.Code{inv}, false},
		{"UpsertUser empty name", func() error { _, err := sec.UpsertUser(ctx, &quirev1.UpsertUserRequest{Password: "p"}); return err }, nil, false},
		{"UpsertUser iterations -1", func() error {
			_, err := sec.UpsertUser(ctx, &quirev1.UpsertUserRequest{Name: "hu", Password: "p", Iterations: -1})
			return err
		}, nil, false},
		{"CreateAcls unknown operation", func() error {
			_, err := sec.CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{{Principal: "User:x", Permission: "ALLOW", Operation: "FROB",
				ResourceType: "TOPIC", ResourceName: "t", PatternType: "LITERAL"}}})
			return err
		}, []codes.Code{inv}, false},
		{"CreateAcls empty", func() error { _, err := sec.CreateAcls(ctx, &quirev1.CreateAclsRequest{}); return err }, []codes.Code{inv}, false},
		{"DeleteAcls unknown resource type", func() error {
			_, err := sec.DeleteAcls(ctx, &quirev1.DeleteAclsRequest{Filters: []*quirev1.Acl{{ResourceType: "GALAXY"}}})
			return err
		}, []codes.Code{inv}, false},
		{"ListAcls unknown operation", func() error {
			_, err := sec.ListAcls(ctx, &quirev1.ListAclsRequest{Filter: &quirev1.Acl{Operation: "FROB"}})
			return err
		}, []codes.Code{inv}, false},
		{"ListAcls principal without a type", func() error {
			_, err := sec.ListAcls(ctx, &quirev1.ListAclsRequest{Filter: &quirev1.Acl{Principal: "nobody"}})
			return err
		}, []codes.Code{inv}, false},
	}
	for _, c := range wholeCases {
		err := c.call()
		var o outcome
		var d string
		if c.may {
			o, d = answer(err)
		} else {
			o, d = refusal(err, c.want...)
		}
		s.report("grpc "+c.name, o, d)
	}

	// Streams' first messages.
	subscribe := func(st *quirev1.SubscribeStart, ack bool) error {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		stream, err := groups.Subscribe(sctx)
		if err != nil {
			return err
		}
		req := &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: st}}
		if ack {
			req = &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{}}}
		}
		if err := stream.Send(req); err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	}
	sub := func(topics ...string) *quirev1.GroupSubscription { return &quirev1.GroupSubscription{Topics: topics} }
	for _, c := range []struct {
		name string
		st   *quirev1.SubscribeStart
		ack  bool
	}{
		{"first message an ack", nil, true},
		{"topic a/b", &quirev1.SubscribeStart{Group: "hg", Subscription: sub("a/b")}, false},
		{"no subscription", &quirev1.SubscribeStart{Group: "hg"}, false},
		{"empty group", &quirev1.SubscribeStart{Subscription: sub(keptTopic)}, false},
		{"max_outstanding_bytes -1", &quirev1.SubscribeStart{Group: "hg", Subscription: sub(keptTopic), MaxOutstandingBytes: -1}, false},
		{"format 42", &quirev1.SubscribeStart{Group: "hg", Subscription: sub(keptTopic), Format: 42}, false},
		{"auto_offset_reset bogus", &quirev1.SubscribeStart{Group: "hg", Subscription: sub(keptTopic), AutoOffsetReset: "bogus"}, false},
		{"isolation_level 42", &quirev1.SubscribeStart{Group: "hg", Subscription: sub(keptTopic), OptionalIsolationLevel: &quirev1.SubscribeStart_IsolationLevel{IsolationLevel: 42}}, false},
	} {
		o, d := refusal(subscribe(c.st, c.ack), inv)
		s.report("grpc Subscribe "+c.name, o, d)
	}
	produceStream := func(req *quirev1.ProduceRequest) error {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		stream, err := prod.ProduceStream(sctx)
		if err != nil {
			return err
		}
		if err := stream.Send(req); err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	}
	o, d := refusal(produceStream(&quirev1.ProduceRequest{CorrelationId: 1}), inv)
	s.report("grpc ProduceStream no partitions", o, d)
	o, d = refusal(produceStream(&quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -2},
		Partitions: []*quirev1.PartitionRecords{{Topic: keptTopic, Records: good}}}), inv)
	s.report("grpc ProduceStream acks -2", o, d)

	// Per-partition refusals, inline in an OK response.
	produce := func(topic string, p int32, records []byte) (*quirev1.Error, error) {
		resp, err := prod.Produce(ctx, &quirev1.ProduceRequest{Partitions: []*quirev1.PartitionRecords{{Topic: topic, Partition: p, Records: records}}})
		if err != nil {
			return nil, err
		}
		return resp.Partitions[0].Error, nil
	}
	fetch := func(topic string, p int32, offset int64) (*quirev1.Error, error) {
		resp, err := cons.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{{Topic: topic, Partition: p, Offset: offset}}})
		if err != nil {
			return nil, err
		}
		return resp.Partitions[0].Error, nil
	}
	listOffsets := func(topic string, p int32, ts int64) (*quirev1.Error, error) {
		resp, err := cons.ListOffsets(ctx, &quirev1.ListOffsetsRequest{Partitions: []*quirev1.ListOffsetsPartition{{Topic: topic, Partition: p, TimestampMs: ts}}})
		if err != nil {
			return nil, err
		}
		return resp.Partitions[0].Error, nil
	}
	deleteRecords := func(topic string, p int32, offset int64) (*quirev1.Error, error) {
		resp, err := admin.DeleteRecords(ctx, &quirev1.DeleteRecordsRequest{Partitions: []*quirev1.DeleteRecordsPartition{{Topic: topic, Partition: p, Offset: offset}}})
		if err != nil {
			return nil, err
		}
		return resp.Partitions[0].Error, nil
	}
	garbage := []byte(strings.Repeat("\xde\xad\xbe\xef", 32))
	for _, c := range []struct {
		name string
		call func() (*quirev1.Error, error)
	}{
		{"Produce partition -1", func() (*quirev1.Error, error) { return produce(keptTopic, -1, good) }},
		{"Produce partition 2147483647", func() (*quirev1.Error, error) { return produce(keptTopic, math.MaxInt32, good) }},
		{"Produce topic a/b", func() (*quirev1.Error, error) { return produce("a/b", 0, good) }},
		{"Produce garbage records", func() (*quirev1.Error, error) { return produce(keptTopic, 0, garbage) }},
		{"Produce no records", func() (*quirev1.Error, error) { return produce(keptTopic, 0, nil) }},
		{"Produce batch claiming 2^31-1 records", func() (*quirev1.Error, error) { return produce(keptTopic, 0, claimRecords(good, math.MaxInt32)) }},
		{"Produce batch claiming -1 records", func() (*quirev1.Error, error) { return produce(keptTopic, 0, claimRecords(good, -1)) }},
		{"Produce batch length 2 GiB", func() (*quirev1.Error, error) { return produce(keptTopic, 0, claimLength(good, math.MaxInt32)) }},
		{"Produce batch length -1", func() (*quirev1.Error, error) { return produce(keptTopic, 0, claimLength(good, -1)) }},
		{"Produce batch cut short", func() (*quirev1.Error, error) { return produce(keptTopic, 0, good[:len(good)-3]) }},
		{"Fetch offset -1", func() (*quirev1.Error, error) { return fetch(keptTopic, 0, -1) }},
		{"Fetch offset 2^62", func() (*quirev1.Error, error) { return fetch(keptTopic, 0, 1<<62) }},
		{"Fetch partition 2147483647", func() (*quirev1.Error, error) { return fetch(keptTopic, math.MaxInt32, 0) }},
		{"Fetch topic a/b", func() (*quirev1.Error, error) { return fetch("a/b", 0, 0) }},
		{"DeleteRecords partition 2147483647", func() (*quirev1.Error, error) { return deleteRecords(keptTopic, math.MaxInt32, 0) }},
		{"DeleteRecords offset 2^62", func() (*quirev1.Error, error) { return deleteRecords(keptTopic, 0, 1<<62) }},
		{"ListOffsets timestamp -3", func() (*quirev1.Error, error) { return listOffsets(keptTopic, 0, -3) }},
		{"ListOffsets partition -1", func() (*quirev1.Error, error) { return listOffsets(keptTopic, -1, -1) }},
	} {
		o, d := inline(c.call())
		s.report("grpc "+c.name, o, d)
	}
}
