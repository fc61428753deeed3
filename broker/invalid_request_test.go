package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// wantPermanent checks that a whole call failed with code ec and a detail
// that does not invite a retry.
func wantPermanent(t *testing.T, what string, err error, ec quirev1.ErrorCode) {
	t.Helper()
	wantStatus(t, err, codes.InvalidArgument, ec)
	for _, d := range status.Convert(err).Details() {
		if e, ok := d.(*quirev1.Error); ok && e.Retriable {
			t.Errorf("%s: %v is marked retriable (%s)", what, e.Code, e.Message)
		}
	}
}

// TestErrorInvalidRequestsAreNotRetriable sends the requests that can never
// succeed (a partition below 0, one at or past the topic's count, an empty
// or malformed topic name) to each RPC that names a partition or a topic:
// every answer is a code that is not retriable, so a client that retries
// what is retriable stops at once. An unknown but well-formed topic is the
// one that stays retriable: it may yet be created.
func TestErrorInvalidRequestsAreNotRetriable(t *testing.T) {
	t.Parallel()
	_, c := start(t, noAutoCreate)
	ctx := ctxT(t)
	createTopic(t, c, "inv", 2, nil)
	groups := quirev1.NewGroupsClient(c.conn)
	batch := makeBatch(1, 10, "x")
	type target struct {
		topic     string
		partition int32
		want      quirev1.ErrorCode
	}
	bad := []target{
		{"inv", -1, quirev1.ErrorCode_INVALID_REQUEST},
		{"inv", 2, quirev1.ErrorCode_INVALID_REQUEST},
		{"inv", 1 << 30, quirev1.ErrorCode_INVALID_REQUEST},
		{"", 0, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION},
		{"no spaces", 0, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION},
	}

	var pr []*quirev1.PartitionRecords
	var fp []*quirev1.FetchPartition
	var lp []*quirev1.ListOffsetsPartition
	var mp []*quirev1.FetchRecordsPartition
	for _, b := range bad {
		mp = append(mp, &quirev1.FetchRecordsPartition{Topic: b.topic, Partition: b.partition})
		pr = append(pr, &quirev1.PartitionRecords{Topic: b.topic, Partition: b.partition, Records: batch})
		fp = append(fp, &quirev1.FetchPartition{Topic: b.topic, Partition: b.partition})
		lp = append(lp, &quirev1.ListOffsetsPartition{Topic: b.topic, Partition: b.partition, TimestampMs: -1})
	}
	presp, err := c.producer.Produce(ctx, &quirev1.ProduceRequest{Partitions: pr})
	if err != nil {
		t.Fatal(err)
	}
	fresp, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{Partitions: fp})
	if err != nil {
		t.Fatal(err)
	}
	lresp, err := c.consumer.ListOffsets(ctx, &quirev1.ListOffsetsRequest{Partitions: lp})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bad {
		wantInline(t, presp.Partitions[i].Error, b.want, false)
		wantInline(t, fresp.Partitions[i].Error, b.want, false)
		wantInline(t, lresp.Partitions[i].Error, b.want, false)

		_, err := c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: b.topic, Partition: b.partition})
		wantPermanent(t, "FetchRecords", err, b.want)
		rec := &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: "v"}}
		if b.topic == "inv" {
			rec.OptionalPartition = &quirev1.ProduceRecord_Partition{Partition: b.partition}
		}
		_, err = c.producer.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: b.topic, Records: []*quirev1.ProduceRecord{rec}})
		wantPermanent(t, "ProduceRecords", err, b.want)

		// The group offset calls, answered by the controller, say the same.
		_, err = groups.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "g",
			Offsets: []*quirev1.OffsetCommit{{Topic: b.topic, Partition: b.partition, Offset: 1}}})
		wantPermanent(t, "CommitOffsets", err, b.want)
		_, err = groups.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "g",
			Partitions: []*quirev1.TopicPartition{{Topic: b.topic, Partition: b.partition}}})
		wantPermanent(t, "FetchOffsets", err, b.want)
		if b.topic != "inv" {
			_, err = c.admin.DescribeProducers(ctx, &quirev1.DescribeProducersRequest{Topic: b.topic})
			wantPermanent(t, "DescribeProducers", err, b.want)
		}
	}
	mresp, err := c.consumer.FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{Partitions: mp})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bad {
		wantInline(t, mresp.Partitions[i].Error, b.want, false)
	}

	md, err := c.meta.GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{"", "missing"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*quirev1.Error{}
	for _, tm := range md.Topics {
		got[tm.Name] = tm.Error
	}
	wantInline(t, got[""], quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, false)
	wantInline(t, got["missing"], quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, true)

	// Nothing of the refused requests was written.
	if n := leo(t, c, "inv", 0) + leo(t, c, "inv", 1); n != 0 {
		t.Fatalf("refused requests appended %d records", n)
	}
}

// TestErrorInvalidFieldsRefused sends, to every RPC that takes it, each
// field value the proto comments call invalid (a negative size, count or
// wait; no partitions; a topic name no topic can have, in a subscription
// too): each is refused at once, INVALID_ARGUMENT with a quire.v1.Error
// that names what was wrong, and nothing is appended.
func TestErrorInvalidFieldsRefused(t *testing.T) {
	_, c := start(t, noAutoCreate)
	ctx := ctxT(t)
	createTopic(t, c, "inv", 1, nil)
	groups := quirev1.NewGroupsClient(c.conn)
	sec := quirev1.NewSecurityClient(c.conn)
	fp := func(maxBytes int32) []*quirev1.FetchPartition {
		return []*quirev1.FetchPartition{{Topic: "inv", MaxBytes: maxBytes}}
	}
	stream := func(req *quirev1.FetchRequest) error {
		s, err := c.consumer.FetchStream(ctx, req)
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	subscribe := func(topics ...string) error {
		s, err := groups.Subscribe(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{
			Group: "g", Subscription: &quirev1.GroupSubscription{Topics: topics}}}}); err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	produceStream := func(req *quirev1.ProduceRequest) error {
		s, err := c.producer.ProduceStream(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(req); err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	batch := makeBatch(1, 10, "x")
	cases := []struct {
		name    string
		call    func() error
		code    quirev1.ErrorCode
		mention string
	}{
		// The long polls would wait a minute if they took the request.
		{"FetchRecords max_bytes", func() error {
			_, err := c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "inv", MaxBytes: -1, MaxWaitMs: 60000})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "max_bytes"},
		{"FetchRecords max_records", func() error {
			_, err := c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "inv", MaxRecords: -5, MaxWaitMs: 60000})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "max_records"},
		{"FetchRecords max_wait_ms", func() error {
			_, err := c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "inv", MaxWaitMs: -1})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "max_wait_ms"},
		{"Fetch max_bytes", func() error {
			_, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{MaxBytes: -1, MinBytes: 1, MaxWaitMs: 60000, Partitions: fp(0)})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "max_bytes"},
		{"Fetch min_bytes", func() error {
			_, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{MinBytes: -1, Partitions: fp(0)})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "min_bytes"},
		{"Fetch partition max_bytes", func() error {
			_, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{MinBytes: 1, MaxWaitMs: 60000, Partitions: fp(-1)})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "max_bytes"},
		{"Fetch no partitions", func() error {
			_, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "no partitions"},
		{"FetchStream max_wait_ms", func() error {
			return stream(&quirev1.FetchRequest{MaxWaitMs: -1, Partitions: fp(0)})
		}, quirev1.ErrorCode_INVALID_REQUEST, "max_wait_ms"},
		{"FetchStream partition max_bytes", func() error {
			return stream(&quirev1.FetchRequest{Partitions: fp(-7)})
		}, quirev1.ErrorCode_INVALID_REQUEST, "max_bytes"},
		{"FetchRecordsMulti max_bytes", func() error {
			_, err := c.consumer.FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{MaxBytes: -1, MaxWaitMs: 60000,
				Partitions: []*quirev1.FetchRecordsPartition{{Topic: "inv"}}})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "max_bytes"},
		{"Produce no partitions", func() error {
			_, err := c.producer.Produce(ctx, &quirev1.ProduceRequest{})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "no partitions"},
		{"Produce acks", func() error {
			_, err := c.producer.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 2},
				Partitions: []*quirev1.PartitionRecords{{Topic: "inv", Records: batch}}})
			return err
		}, quirev1.ErrorCode_INVALID_REQUIRED_ACKS, "acks"},
		{"ProduceStream no partitions", func() error {
			return produceStream(&quirev1.ProduceRequest{CorrelationId: 1})
		}, quirev1.ErrorCode_INVALID_REQUEST, "no partitions"},
		{"ProduceRecords no records", func() error {
			_, err := c.producer.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: "inv"})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "no records"},
		{"Subscribe topic a/b", func() error {
			return subscribe("inv", "a/b")
		}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "a/b"},
		{"Subscribe empty topic", func() error {
			return subscribe("")
		}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "empty"},
		{"ConsumerGroupHeartbeat topic a/b", func() error {
			_, err := groups.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{Group: "g", MemberId: "m",
				RebalanceTimeoutMs: 1000, Subscription: &quirev1.GroupSubscription{Topics: []string{"a/b"}}})
			return err
		}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "a/b"},
		{"DeleteAcls filter resource type", func() error {
			_, err := sec.DeleteAcls(ctx, &quirev1.DeleteAclsRequest{Filters: []*quirev1.Acl{{ResourceType: "Galaxy"}}})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "Galaxy"},
		{"ListAcls filter operation", func() error {
			_, err := sec.ListAcls(ctx, &quirev1.ListAclsRequest{Filter: &quirev1.Acl{Operation: "Frob"}})
			return err
		}, quirev1.ErrorCode_INVALID_REQUEST, "Frob"},
		// A group id no group can have, on every call that takes one.
		{"CommitOffsets empty group", func() error {
			_, err := groups.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Offsets: []*quirev1.OffsetCommit{{Topic: "inv", Offset: 1}}})
			return err
		}, quirev1.ErrorCode_INVALID_GROUP_ID, "empty"},
		{"FetchOffsets empty group", func() error {
			_, err := groups.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{})
			return err
		}, quirev1.ErrorCode_INVALID_GROUP_ID, "empty"},
		{"DeleteGroup empty group", func() error {
			_, err := groups.DeleteGroup(ctx, &quirev1.DeleteGroupRequest{})
			return err
		}, quirev1.ErrorCode_INVALID_GROUP_ID, "empty"},
		{"DescribeGroup group with NUL", func() error {
			_, err := groups.DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "g\x00"})
			return err
		}, quirev1.ErrorCode_INVALID_GROUP_ID, "NUL"},
		{"ResetOffsets empty group", func() error {
			_, err := groups.ResetOffsets(ctx, &quirev1.ResetOffsetsRequest{To: &quirev1.ResetOffsetsRequest_Earliest{Earliest: true}, DryRun: true})
			return err
		}, quirev1.ErrorCode_INVALID_GROUP_ID, "empty"},
		{"ConsumerGroupHeartbeat empty group", func() error {
			_, err := groups.ConsumerGroupHeartbeat(ctx, &quirev1.ConsumerGroupHeartbeatRequest{MemberId: "m", RebalanceTimeoutMs: 1000,
				Subscription: &quirev1.GroupSubscription{Topics: []string{"inv"}}})
			return err
		}, quirev1.ErrorCode_INVALID_GROUP_ID, "empty"},
		{"Subscribe group of 300 bytes", func() error {
			s, err := groups.Subscribe(ctx)
			if err != nil {
				return err
			}
			if err := s.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{
				Group: strings.Repeat("g", 300), Subscription: &quirev1.GroupSubscription{Topics: []string{"inv"}}}}}); err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, quirev1.ErrorCode_INVALID_GROUP_ID, "255"},
		// A topic name no topic can have, on the calls not covered above.
		{"ResetOffsets topic a/b", func() error {
			_, err := groups.ResetOffsets(ctx, &quirev1.ResetOffsetsRequest{Group: "g", Topics: []string{"a/b"},
				To: &quirev1.ResetOffsetsRequest_Earliest{Earliest: true}, DryRun: true})
			return err
		}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "a/b"},
		{"AlterConfigs topic a/b", func() error {
			_, err := c.admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: "a/b", Set: map[string]string{"retention.ms": "1"}})
			return err
		}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "a/b"},
		{"DescribeConfigs topic a/b", func() error {
			_, err := c.admin.DescribeConfigs(ctx, &quirev1.DescribeConfigsRequest{Topic: "a/b"})
			return err
		}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "a/b"},
		{"CreatePartitions topic a/b", func() error {
			_, err := c.admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "a/b", TotalCount: 3})
			return err
		}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "a/b"},
		{"DeleteTopic a/b", func() error {
			_, err := c.admin.DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: "a/b"})
			return err
		}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "a/b"},
		{"CreateTopic a/b", func() error {
			_, err := c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "a/b"})
			return err
		}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "a/b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			wantStatus(t, err, codes.InvalidArgument, tc.code, tc.mention)
		})
	}
	if n := leo(t, c, "inv", 0); n != 0 {
		t.Fatalf("refused requests appended %d records", n)
	}
}

// rawCodec sends and receives bytes as they are, to put on the wire what
// no generated client would.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

var _ encoding.Codec = rawCodec{}

// TestErrorMalformedRequestIsInvalidArgument sends bytes that do not parse
// as the request (broken wire format, a string field that is not UTF-8)
// to unary calls and to streams, the produce paths' own decoders
// included: each is INVALID_ARGUMENT with a quire.v1.Error
// (INVALID_REQUEST) naming the message, not INTERNAL.
func TestErrorMalformedRequestIsInvalidArgument(t *testing.T) {
	_, c := start(t, noAutoCreate)
	ctx := ctxT(t)
	createTopic(t, c, "mal", 1, nil)
	// A SubscribeRequest whose start's group id is the byte 0xff.
	var start, badGroup []byte
	start = protowire.AppendTag(start, 1, protowire.BytesType)
	start = protowire.AppendString(start, "\xff")
	badGroup = protowire.AppendTag(badGroup, 1, protowire.BytesType)
	badGroup = protowire.AppendBytes(badGroup, start)
	truncated := []byte{0x1a, 0x40, 0x0a, 0x03, 'm', 'a', 'l'} // partitions: 64 bytes claimed, 5 sent
	garbage := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	badTopic := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xc3\x28")

	// Field 1 of each is a string (or, for Produce and Fetch, an integer:
	// they get only the broken wire formats).
	unary := []struct {
		method, want string
		utf8         bool
	}{
		{"/quire.v1.Producer/Produce", "quire.v1.ProduceRequest", false},
		{"/quire.v1.Consumer/Fetch", "quire.v1.FetchRequest", false},
		{"/quire.v1.Producer/ProduceRecords", "quire.v1.ProduceRecordsRequest", true},
		{"/quire.v1.Consumer/FetchRecords", "quire.v1.FetchRecordsRequest", true},
		{"/quire.v1.Admin/CreateTopic", "quire.v1.CreateTopicRequest", true},
		{"/quire.v1.Groups/CommitOffsets", "quire.v1.CommitOffsetsRequest", true},
		{"/quire.v1.Metadata/GetMetadata", "quire.v1.GetMetadataRequest", true},
	}
	for _, u := range unary {
		bodies := [][]byte{truncated, garbage}
		if u.utf8 {
			bodies = append(bodies, badTopic)
		}
		for _, body := range bodies {
			in, out := body, []byte(nil)
			err := c.conn.Invoke(ctx, u.method, &in, &out, grpc.ForceCodec(rawCodec{}))
			wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "malformed", u.want)
		}
	}

	streams := []struct {
		method string
		body   []byte
		want   string
	}{
		{"/quire.v1.Groups/Subscribe", badGroup, "quire.v1.SubscribeRequest"},
		{"/quire.v1.Groups/Subscribe", garbage, "quire.v1.SubscribeRequest"},
		{"/quire.v1.Producer/ProduceStream", truncated, "quire.v1.ProduceRequest"},
		{"/quire.v1.Producer/ProduceStream", garbage, "quire.v1.ProduceRequest"},
	}
	for _, s := range streams {
		desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
		cs, err := c.conn.NewStream(ctx, desc, s.method, grpc.ForceCodec(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		in := s.body
		if err := cs.SendMsg(&in); err != nil {
			t.Fatal(err)
		}
		var out []byte
		err = cs.RecvMsg(&out)
		wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "malformed", s.want)
	}
	// A Subscribe stream whose later message does not parse ends with
	// the same refusal (after whatever events came before it).
	startMsg, err := protobuf.Marshal(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{
		Group: "mal-g", Subscription: &quirev1.GroupSubscription{Topics: []string{"mal"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/quire.v1.Groups/Subscribe", grpc.ForceCodec(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range [][]byte{startMsg, garbage} {
		if err := cs.SendMsg(&m); err != nil {
			t.Fatal(err)
		}
	}
	for {
		var out []byte
		if err = cs.RecvMsg(&out); err != nil {
			break
		}
	}
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "malformed", "quire.v1.SubscribeRequest")

	if n := leo(t, c, "mal", 0); n != 0 {
		t.Fatalf("malformed requests appended %d records", n)
	}
}

// TestErrorStatusFitsClientHeaderLimit: a refusal echoing a 2 KiB config
// value reaches a client whose header limit is gRPC's default for C-core
// clients (8 KiB: Python, Ruby, C++) as the refusal itself, not as a reset
// stream, with the value cut short in its message.
func TestErrorStatusFitsClientHeaderLimit(t *testing.T) {
	b, _ := start(t, noAutoCreate)
	cc, err := grpc.NewClient(b.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithMaxHeaderListSize(8<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	admin := quirev1.NewAdminClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range []string{strings.Repeat("x", 2048), strings.Repeat("é\x01", 2048), strings.Repeat("z", 64<<10)} {
		_, err = admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "big", Configs: map[string]string{"cleanup.policy": v, "retention.ms": v}})
		wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, "bytes)")
	}
}
