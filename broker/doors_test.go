package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
)

// The two doors are adapters over one request core: the same produce,
// fetch, list-offsets, delete-records, group offset and ACL cases, run
// through gRPC and through Kafka's protocol each on a topic (and group,
// and ACLs) of its own, answer the same offsets, the same records byte
// for byte and the same error codes (a quire.v1 ErrorCode is Kafka's
// number for the codes these meet).

// doorOp is one step of a case.
type doorOp struct {
	// produce, fetch, list, delete; commit, committed (fetch the
	// committed offset), describe (a group), offsetdelete (delete the
	// committed offset); acl-create, acl-list, acl-delete (of ACLs on the
	// topic); and doors_admin_test.go's.
	op        string
	partition int32
	// fetch: offset; list: timestamp; delete: offset; produce: records (0:
	// a corrupt batch); commit: offset; acl-create and acl-delete: which
	// ACL (doorACL).
	arg int64
}

// doorGroup is the group a door's steps on topic commit for.
func doorGroup(topic string) string { return "group-" + topic }

// doorACL is the arg-th ACL of the cases on topic: 0 lets User:door
// read it, 1 write it; 2 names a principal no ACL can have.
func doorACL(topic string, arg int64) *quirev1.Acl {
	a := &quirev1.Acl{Principal: "User:door", Permission: "Allow", Operation: "Read", ResourceType: "Topic", ResourceName: topic, PatternType: "Literal"}
	switch arg {
	case 1:
		a.Operation = "Write"
	case 2:
		a.Principal = "door"
	}
	return a
}

// doorAnswer is what a door answered a step. On an error only the code
// is compared: each protocol has its own convention for the other fields
// then (Kafka's fetch answers a high watermark of -1, quire.v1's the
// partition's).
type doorAnswer struct {
	code    int32
	offset  int64 // base offset, high watermark, offset or low watermark
	records []byte
}

func (a doorAnswer) String() string {
	return fmt.Sprintf("code %d offset %d, %d bytes of records", a.code, a.offset, len(a.records))
}

// door runs steps on one topic.
type door interface {
	run(t *testing.T, ctx context.Context, topic string, s doorOp) doorAnswer
}

// doorBatch is n records, the same bytes every time; 0 is a batch whose
// CRC does not match.
func doorBatch(n int64) []byte {
	bld := record.NewBuilder(record.None)
	for i := range max(n, 2) {
		bld.Append(1_700_000_000_000+i, []byte(fmt.Sprintf("k%d", i)), []byte(fmt.Sprintf("value %d", i)), nil)
	}
	b := bld.Build()
	if n == 0 {
		b[len(b)-1] ^= 0xff
	}
	return b
}

type grpcDoor struct{ c *clients }

// grpcCode is the code of a whole call's status, or of an inline error.
func grpcCode(t *testing.T, err error, inline *quirev1.Error) int32 {
	t.Helper()
	if err != nil {
		for _, d := range status.Convert(err).Details() {
			if e, ok := d.(*quirev1.Error); ok {
				return int32(e.Code)
			}
		}
		t.Fatalf("a status without a quire.v1.Error: %v", err)
	}
	if inline != nil {
		return int32(inline.Code)
	}
	return 0
}

func (g grpcDoor) run(t *testing.T, ctx context.Context, topic string, s doorOp) doorAnswer {
	if a, ok := g.runAdmin(t, ctx, topic, s); ok {
		return a
	}
	switch s.op {
	case "produce":
		resp, err := g.c.producer.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1},
			Partitions: []*quirev1.PartitionRecords{{Topic: topic, Partition: s.partition, Records: doorBatch(s.arg)}}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		p := resp.Partitions[0]
		return doorAnswer{code: grpcCode(t, nil, p.Error), offset: p.BaseOffset}
	case "fetch":
		resp, err := g.c.consumer.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{{Topic: topic, Partition: s.partition, Offset: s.arg}}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		p := resp.Partitions[0]
		return doorAnswer{code: grpcCode(t, nil, p.Error), offset: p.HighWatermark, records: p.Records}
	case "list":
		resp, err := g.c.consumer.ListOffsets(ctx, &quirev1.ListOffsetsRequest{Partitions: []*quirev1.ListOffsetsPartition{{Topic: topic, Partition: s.partition, TimestampMs: s.arg}}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		p := resp.Partitions[0]
		return doorAnswer{code: grpcCode(t, nil, p.Error), offset: p.Offset}
	case "delete":
		resp, err := g.c.admin.DeleteRecords(ctx, &quirev1.DeleteRecordsRequest{Partitions: []*quirev1.DeleteRecordsPartition{{Topic: topic, Partition: s.partition, Offset: s.arg}}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		p := resp.Partitions[0]
		return doorAnswer{code: grpcCode(t, nil, p.Error), offset: p.LowWatermark}
	case "commit":
		_, err := quirev1.NewGroupsClient(g.c.conn).CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: doorGroup(topic),
			Offsets: []*quirev1.OffsetCommit{{Topic: topic, Partition: s.partition, Offset: s.arg}}})
		return doorAnswer{code: grpcCode(t, err, nil), offset: s.arg}
	case "committed":
		resp, err := quirev1.NewGroupsClient(g.c.conn).FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: doorGroup(topic),
			Partitions: []*quirev1.TopicPartition{{Topic: topic, Partition: s.partition}}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		a := doorAnswer{offset: -1}
		for _, o := range resp.Offsets {
			if o.Topic == topic && o.Partition == s.partition {
				a.offset = o.Offset
			}
		}
		return a
	case "describe":
		resp, err := quirev1.NewGroupsClient(g.c.conn).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: doorGroup(topic)})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		return doorAnswer{offset: int64(len(resp.Members))}
	case "offsetdelete":
		resp, err := quirev1.NewGroupsClient(g.c.conn).DeleteOffsets(ctx, &quirev1.DeleteOffsetsRequest{Group: doorGroup(topic),
			Topics: []*quirev1.DeleteOffsetsTopic{{Topic: topic, Partitions: []int32{s.partition}}}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		return doorAnswer{code: grpcCode(t, nil, resp.Partitions[0].Error)}
	case "acl-create":
		_, err := quirev1.NewSecurityClient(g.c.conn).CreateAcls(ctx, &quirev1.CreateAclsRequest{Acls: []*quirev1.Acl{doorACL(topic, s.arg)}})
		return doorAnswer{code: grpcCode(t, err, nil)}
	case "acl-list":
		resp, err := quirev1.NewSecurityClient(g.c.conn).ListAcls(ctx, &quirev1.ListAclsRequest{Filter: &quirev1.Acl{ResourceType: "Topic", ResourceName: topic}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		return doorAnswer{offset: int64(len(resp.Acls))}
	case "acl-delete":
		f := doorACL(topic, s.arg)
		f.Principal = ""
		resp, err := quirev1.NewSecurityClient(g.c.conn).DeleteAcls(ctx, &quirev1.DeleteAclsRequest{Filters: []*quirev1.Acl{f}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		return doorAnswer{offset: int64(len(resp.Deleted))}
	}
	t.Fatalf("unknown step %q", s.op)
	return doorAnswer{}
}

// kafkaDoor sends Kafka's requests as they are to the broker, not
// through the client's partitioning (which would refuse some of the
// cases before sending them).
type kafkaDoor struct{ cl *kgo.Client }

func (k kafkaDoor) send(t *testing.T, ctx context.Context, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := k.cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp
}

func (k kafkaDoor) run(t *testing.T, ctx context.Context, topic string, s doorOp) doorAnswer {
	if a, ok := k.runAdmin(t, ctx, topic, s); ok {
		return a
	}
	switch s.op {
	case "produce":
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 8, -1, 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = s.partition, doorBatch(s.arg)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := k.send(t, ctx, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		return doorAnswer{code: int32(p.ErrorCode), offset: p.BaseOffset}
	case "fetch":
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.SessionEpoch = 11, -1, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = s.partition, s.arg, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := k.send(t, ctx, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		return doorAnswer{code: int32(p.ErrorCode), offset: p.HighWatermark, records: p.RecordBatches}
	case "list":
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID = 4, -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = s.partition, s.arg, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := k.send(t, ctx, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		return doorAnswer{code: int32(p.ErrorCode), offset: p.Offset}
	case "delete":
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version, req.TimeoutMillis = 1, 30000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = s.partition, s.arg
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := k.send(t, ctx, req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
		return doorAnswer{code: int32(p.ErrorCode), offset: p.LowWatermark}
	case "commit":
		// As an admin commits: no member (generation -1).
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, doorGroup(topic), -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = s.partition, s.arg, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := k.send(t, ctx, req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0]
		return doorAnswer{code: int32(p.ErrorCode), offset: s.arg}
	case "committed":
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = doorGroup(topic)
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, []int32{s.partition}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		g := k.send(t, ctx, req).(*kmsg.OffsetFetchResponse).Groups[0]
		if g.ErrorCode != 0 {
			return doorAnswer{code: int32(g.ErrorCode), offset: -1}
		}
		p := g.Topics[0].Partitions[0]
		return doorAnswer{code: int32(p.ErrorCode), offset: p.Offset}
	case "describe":
		// KIP-848's describe, whose group not found is an error as the
		// gRPC call's is (the classic DescribeGroups answers it Dead).
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{doorGroup(topic)}
		g := k.send(t, ctx, req).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
		if g.ErrorCode != 0 {
			return doorAnswer{code: int32(g.ErrorCode), offset: -1}
		}
		return doorAnswer{offset: int64(len(g.Members))}
	case "offsetdelete":
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = doorGroup(topic)
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetDeleteRequestTopicPartition()
		rp.Partition = s.partition
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := k.send(t, ctx, req).(*kmsg.OffsetDeleteResponse)
		if resp.ErrorCode != 0 {
			return doorAnswer{code: int32(resp.ErrorCode), offset: -1}
		}
		return doorAnswer{code: int32(resp.Topics[0].Partitions[0].ErrorCode)}
	case "acl-create":
		a := doorACL(topic, s.arg)
		req := kmsg.NewPtrCreateACLsRequest()
		req.Version = 1
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = a.Principal, "*", kafkaOp(a.Operation), kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, c)
		r := k.send(t, ctx, req).(*kmsg.CreateACLsResponse).Results[0]
		return doorAnswer{code: int32(r.ErrorCode)}
	case "acl-list":
		req := kmsg.NewPtrDescribeACLsRequest()
		req.Version = 1
		req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(topic), kmsg.ACLResourcePatternTypeAny
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		resp := k.send(t, ctx, req).(*kmsg.DescribeACLsResponse)
		if resp.ErrorCode != 0 {
			return doorAnswer{code: int32(resp.ErrorCode), offset: -1}
		}
		n := 0
		for _, r := range resp.Resources {
			n += len(r.ACLs)
		}
		return doorAnswer{offset: int64(n)}
	case "acl-delete":
		a := doorACL(topic, s.arg)
		req := kmsg.NewPtrDeleteACLsRequest()
		req.Version = 1
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(topic), kmsg.ACLResourcePatternTypeLiteral
		f.Operation, f.PermissionType = kafkaOp(a.Operation), kmsg.ACLPermissionTypeAllow
		req.Filters = append(req.Filters, f)
		r := k.send(t, ctx, req).(*kmsg.DeleteACLsResponse).Results[0]
		if r.ErrorCode != 0 {
			return doorAnswer{code: int32(r.ErrorCode), offset: -1}
		}
		return doorAnswer{offset: int64(len(r.MatchingACLs))}
	}
	t.Fatalf("unknown step %q", s.op)
	return doorAnswer{}
}

// kafkaOp is Kafka's number of the operations doorACL grants.
func kafkaOp(op string) kmsg.ACLOperation {
	if op == "Write" {
		return kmsg.ACLOperationWrite
	}
	return kmsg.ACLOperationRead
}

func TestDoorsAnswerAlike(t *testing.T) {
	t.Parallel()
	b, addr := startKafkaBroker(t)
	// ACLs and every other command at the latest level are refused
	// (UNSUPPORTED_VERSION) until the new cluster finalized it.
	brokertest.WaitMetadataVersion(t, b, metadata.LatestMetadataVersion)
	c := dial(t, b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	doors := map[string]door{"grpc": grpcDoor{c}, "kafka": kafkaDoor{cl}}
	const (
		none          = 0
		outOfRange    = int32(quirev1.ErrorCode_OFFSET_OUT_OF_RANGE)
		corrupt       = int32(quirev1.ErrorCode_CORRUPT_MESSAGE)
		unknownTopic  = int32(quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION)
		invalidReq    = int32(quirev1.ErrorCode_INVALID_REQUEST)
		exists        = int32(quirev1.ErrorCode_TOPIC_ALREADY_EXISTS)
		invalidParts  = int32(quirev1.ErrorCode_INVALID_PARTITIONS)
		invalidConfig = int32(quirev1.ErrorCode_INVALID_CONFIG)
		latest        = -1
		earliest      = -2
		groupNotFound = int32(quirev1.ErrorCode_GROUP_ID_NOT_FOUND)
		// notNeeded: the preferred replica leads already.
		notNeeded     = int32(quirev1.ErrorCode_ELECTION_NOT_NEEDED)
		noSuchTopicOp = -100 // a partition of a topic that does not exist
	)
	type step struct {
		doorOp
		code   int32
		offset int64
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"produce, read, list, delete", []step{
			{doorOp{"produce", 0, 3}, none, 0},
			{doorOp{"produce", 0, 2}, none, 3},
			{doorOp{"produce", 1, 4}, none, 0},
			{doorOp{"fetch", 0, 0}, none, 5},
			{doorOp{"fetch", 0, 3}, none, 5},
			{doorOp{"fetch", 1, 0}, none, 4},
			{doorOp{"list", 0, latest}, none, 5},
			{doorOp{"list", 0, earliest}, none, 0},
			{doorOp{"delete", 0, 3}, none, 3},
			{doorOp{"list", 0, earliest}, none, 3},
			{doorOp{"fetch", 0, 0}, outOfRange, 5},
			{doorOp{"delete", 1, -1}, none, 4},
			{doorOp{"fetch", 1, 4}, none, 4},
		}},
		{"refused", []step{
			{doorOp{"produce", 0, 0}, corrupt, -1},
			{doorOp{"produce", 7, 1}, invalidReq, -1},
			{doorOp{"fetch", 0, 9}, outOfRange, 0},
			{doorOp{"fetch", 7, 0}, invalidReq, -1},
			{doorOp{"list", 7, latest}, invalidReq, -1},
			{doorOp{"delete", 0, 9}, outOfRange, -1},
			{doorOp{"delete", 7, 0}, invalidReq, -1},
			{doorOp{"fetch", noSuchTopicOp, 0}, unknownTopic, -1},
			{doorOp{"list", noSuchTopicOp, latest}, unknownTopic, -1},
			{doorOp{"delete", noSuchTopicOp, 0}, unknownTopic, -1},
		}},
		{"group offsets", []step{
			{doorOp{"describe", 0, 0}, groupNotFound, -1},
			{doorOp{"committed", 0, 0}, none, -1},
			{doorOp{"commit", 0, 7}, none, 7},
			{doorOp{"commit", 1, 3}, none, 3},
			{doorOp{"committed", 0, 0}, none, 7},
			{doorOp{"committed", 1, 0}, none, 3},
			{doorOp{"commit", 0, 9}, none, 9},
			{doorOp{"committed", 0, 0}, none, 9},
			{doorOp{"describe", 0, 0}, none, 0},
			{doorOp{"commit", noSuchTopicOp, 1}, unknownTopic, 1},
			{doorOp{"offsetdelete", 1, 0}, none, 0},
			{doorOp{"committed", 1, 0}, none, -1},
			{doorOp{"committed", 0, 0}, none, 9},
			{doorOp{"offsetdelete", 1, 0}, none, 0},
			{doorOp{"offsetdelete", noSuchTopicOp, 0}, groupNotFound, -1},
		}},
		{"ACLs", []step{
			{doorOp{"acl-list", 0, 0}, none, 0},
			{doorOp{"acl-create", 0, 0}, none, 0},
			{doorOp{"acl-create", 0, 1}, none, 0},
			{doorOp{"acl-create", 0, 2}, invalidReq, 0},
			{doorOp{"acl-list", 0, 0}, none, 2},
			{doorOp{"acl-delete", 0, 1}, none, 1},
			{doorOp{"acl-list", 0, 0}, none, 1},
			{doorOp{"acl-delete", 0, 1}, none, 0},
			{doorOp{"acl-delete", 0, 0}, none, 1},
			{doorOp{"acl-list", 0, 0}, none, 0},
		}},
		{"preferred leaders", []step{
			{doorOp{"elect", 0, 0}, notNeeded, 0},
			{doorOp{"elect", 1, 0}, notNeeded, 0},
			{doorOp{"elect", 7, 0}, unknownTopic, 0},
			{doorOp{"elect", noSuchTopicOp, 0}, unknownTopic, 0},
		}},
		{"topic and config administration", []step{
			{doorOp{"create", 0, 3}, exists, -1},
			{doorOp{"partitions", 0, 2}, invalidParts, 0},
			{doorOp{"partitions", 0, 3}, none, 0},
			{doorOp{"meta", 0, 0}, none, 3},
			{doorOp{"produce", 2, 2}, none, 0},
			{doorOp{"alter", 0, 5000}, none, 0},
			{doorOp{"configs", 0, 0}, none, 5000},
			{doorOp{"alter", 0, -1}, invalidConfig, 0},
			{doorOp{"configs", 0, 0}, none, 5000},
			{doorOp{"deletetopic", 0, 0}, none, 0},
			{doorOp{"configs", 0, 0}, unknownTopic, -1},
			{doorOp{"meta", 0, 0}, unknownTopic, -1},
			{doorOp{"deletetopic", 0, 0}, unknownTopic, 0},
			{doorOp{"create", 0, -5}, invalidParts, -1},
			{doorOp{"create", 0, 4}, none, 4},
			{doorOp{"partitions", noSuchTopicOp, 5}, unknownTopic, 0},
			{doorOp{"alter", noSuchTopicOp, 1}, unknownTopic, 0},
			{doorOp{"create", noSuchTopicOp, 1}, none, 1},
			{doorOp{"create", noSuchTopicOp, 1}, exists, -1},
		}},
	}
	// Each step gets its own deadline: the whole table is some 120 calls,
	// which on a loaded machine take longer than one call's 30 s.
	for i, tc := range cases {
		answers := map[string][]doorAnswer{}
		for name, d := range doors {
			topic := fmt.Sprintf("doors-%d-%s", i, name)
			createTopic(t, c, topic, 2, nil)
			for _, s := range tc.steps {
				op, on := s.doorOp, topic
				if op.partition == noSuchTopicOp {
					op.partition, on = 0, topic+"-missing"
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				answers[name] = append(answers[name], d.run(t, ctx, on, op))
				cancel()
			}
		}
		for j, s := range tc.steps {
			g, k := answers["grpc"][j], answers["kafka"][j]
			if g.code != k.code || g.code == none && (g.offset != k.offset || !bytes.Equal(g.records, k.records)) {
				t.Errorf("%s, step %d (%+v): gRPC answered %v, Kafka %v", tc.name, j, s.doorOp, g, k)
			}
			if g.code != s.code || g.code == none && g.offset != s.offset {
				t.Errorf("%s, step %d (%+v): answered %v, want code %d offset %d", tc.name, j, s.doorOp, g, s.code, s.offset)
			}
			if s.op == "fetch" && s.code == none && s.offset > s.arg && len(g.records) == 0 {
				t.Errorf("%s, step %d (%+v): no records", tc.name, j, s.doorOp)
			}
		}
	}
}
