package broker_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/metadata"
)

func TestBrokerHealthAndReflection(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	hr, err := healthpb.NewHealthClient(c.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hr, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(c.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	have := map[string]bool{}
	for _, s := range resp.GetListServicesResponse().GetService() {
		have[s.Name] = true
	}
	for _, want := range []string{"quire.v1.Admin", "quire.v1.Producer", "quire.v1.Consumer", "quire.v1.Metadata", "quire.v1.Groups", "grpc.health.v1.Health"} {
		if !have[want] {
			t.Errorf("reflection does not list %s (has %v)", want, have)
		}
	}
}

func TestAdminCreateDescribeListTopics(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	td := createTopic(t, c, "orders", 3, map[string]string{"retention.ms": "60000"})
	if td.Name != "orders" || len(td.Partitions) != 3 || td.TopicId == "" {
		t.Fatalf("created %+v", td)
	}
	for i, p := range td.Partitions {
		if p.Partition != int32(i) || p.Leader != 1 || len(p.Replicas) != 1 || len(p.Isr) != 1 {
			t.Errorf("partition %d: %+v", i, p)
		}
		if p.HighWatermark != 0 || p.LogEndOffset != 0 || p.LogStartOffset != 0 {
			t.Errorf("partition %d offsets: %+v", i, p)
		}
	}
	produce(t, c, "orders", 1, makeBatch(5, 10, "x"))

	dr, err := c.admin.DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	p1 := dr.Topics[0].Partitions[1]
	if p1.HighWatermark != 5 || p1.LogEndOffset != 5 || p1.LogStartOffset != 0 {
		t.Fatalf("after produce: %+v", p1)
	}
	if dr.Topics[0].Configs["retention.ms"] != "60000" {
		t.Fatalf("configs: %v", dr.Topics[0].Configs)
	}

	createTopic(t, c, "audit", 1, nil)
	lr, err := c.admin.ListTopics(ctx, &quirev1.ListTopicsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lr.Topics) != 2 || lr.Topics[0].Name != "audit" || lr.Topics[1].Name != "orders" || lr.Topics[1].Partitions != 3 || lr.Topics[1].ReplicationFactor != 1 {
		t.Fatalf("list: %v", lr.Topics)
	}
	all, err := c.admin.DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{})
	if err != nil || len(all.Topics) != 2 {
		t.Fatalf("describe all: %v %v", all, err)
	}

	// Defaults apply when partitions and replication factor are unset.
	def, err := c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "defaults"})
	if err != nil || len(def.Topic.Partitions) != 1 {
		t.Fatalf("create with defaults: %v %v", def, err)
	}

	// validate_only creates nothing.
	if _, err := c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "dry", ValidateOnly: true}); err != nil {
		t.Fatal(err)
	}
	_, err = c.admin.DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{"dry"}})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "dry")

	_, err = c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "orders"})
	wantStatus(t, err, codes.AlreadyExists, quirev1.ErrorCode_TOPIC_ALREADY_EXISTS, "orders")
}

func TestAdminCreateTopicBadInput(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	long := strings.Repeat("a", 250)
	cases := []struct {
		name    string
		req     *quirev1.CreateTopicRequest
		ec      quirev1.ErrorCode
		mention string
	}{
		{"empty name", &quirev1.CreateTopicRequest{Name: ""}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "empty"},
		{"dot", &quirev1.CreateTopicRequest{Name: "."}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, `"."`},
		{"dotdot", &quirev1.CreateTopicRequest{Name: ".."}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, `".."`},
		{"slash", &quirev1.CreateTopicRequest{Name: "a/b"}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, `'/'`},
		{"space", &quirev1.CreateTopicRequest{Name: "a b"}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "a b"},
		{"too long", &quirev1.CreateTopicRequest{Name: long}, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "249"},
		{"zero partitions", &quirev1.CreateTopicRequest{Name: "t", OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 0}}, quirev1.ErrorCode_INVALID_PARTITIONS, "partitions"},
		{"negative partitions", &quirev1.CreateTopicRequest{Name: "t", OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: -3}}, quirev1.ErrorCode_INVALID_PARTITIONS, "-3"},
		{"zero rf", &quirev1.CreateTopicRequest{Name: "t", OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 0}}, quirev1.ErrorCode_INVALID_REPLICATION_FACTOR, "replication factor"},
		{"rf above brokers", &quirev1.CreateTopicRequest{Name: "t", OptionalReplicationFactor: &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: 3}}, quirev1.ErrorCode_INVALID_REPLICATION_FACTOR, "live broker"},
		{"unknown config", &quirev1.CreateTopicRequest{Name: "t", Configs: map[string]string{"retention.fortnights": "1"}}, quirev1.ErrorCode_INVALID_CONFIG, "retention.fortnights"},
		{"bad config value", &quirev1.CreateTopicRequest{Name: "t", Configs: map[string]string{"retention.ms": "soon"}}, quirev1.ErrorCode_INVALID_CONFIG, "retention.ms"},
		{"config below range", &quirev1.CreateTopicRequest{Name: "t", Configs: map[string]string{"min.insync.replicas": "0"}}, quirev1.ErrorCode_INVALID_CONFIG, "min.insync.replicas"},
		{"bad cleanup policy", &quirev1.CreateTopicRequest{Name: "t", Configs: map[string]string{"cleanup.policy": "compact,shred"}}, quirev1.ErrorCode_INVALID_CONFIG, "cleanup.policy"},
		{"long request id", &quirev1.CreateTopicRequest{Name: "t", RequestId: strings.Repeat("r", 65)}, quirev1.ErrorCode_INVALID_REQUEST, "request id is 65 bytes, the limit is 64"},
		{"request id with a newline", &quirev1.CreateTopicRequest{Name: "t", RequestId: "a\nb"}, quirev1.ErrorCode_INVALID_REQUEST, "byte 0x0a"},
		{"validate-only request id with é", &quirev1.CreateTopicRequest{Name: "t", RequestId: "caf\u00e9", ValidateOnly: true}, quirev1.ErrorCode_INVALID_REQUEST, "only printable ASCII"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.admin.CreateTopic(ctx, tc.req)
			wantStatus(t, err, codes.InvalidArgument, tc.ec, tc.mention)
		})
	}
	lr, err := c.admin.ListTopics(ctx, &quirev1.ListTopicsRequest{})
	if err != nil || len(lr.Topics) != 0 {
		t.Fatalf("bad requests created topics: %v %v", lr, err)
	}
	// The longest valid name is fine.
	createTopic(t, c, strings.Repeat("a", 249), 1, nil)
	createTopic(t, c, "Valid_name-1.x", 1, nil)
}

// A create with a request id is answered as created when the topic of
// that name was created with that request id (a retry of a create that
// committed), with the topic's description and an index that has it;
// another request id, or none, is TOPIC_ALREADY_EXISTS. The request id
// never becomes the topic's id: deleted, the topic is created anew by
// the same request id, with a new id.
func TestAdminCreateTopicWithRequestID(t *testing.T) {
	t.Parallel()
	b, c := start(t, noAutoCreate)
	// The node keeps request ids from the level that added them, which
	// it raises to on its own once it has registered.
	brokertest.WaitMetadataVersion(t, b, metadata.MetadataVersionCreateRequestID)
	ctx := ctxT(t)
	req := &quirev1.CreateTopicRequest{Name: "once", RequestId: "retry-me-1", OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 2}}
	first, err := c.admin.CreateTopic(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	id := first.Topic.TopicId
	if id == "" || id == req.RequestId || len(first.Topic.Partitions) != 2 || first.MetadataIndex == 0 {
		t.Fatalf("created %v at %d, want a topic id of the node's and 2 partitions", first.Topic, first.MetadataIndex)
	}
	again, err := c.admin.CreateTopic(ctx, req)
	if err != nil {
		t.Fatalf("the same create again: %v", err)
	}
	if again.Topic.TopicId != id || len(again.Topic.Partitions) != 2 || again.MetadataIndex < first.MetadataIndex {
		t.Errorf("the same create again answered %v at %d, want the topic created at %d", again.Topic, again.MetadataIndex, first.MetadataIndex)
	}
	_, err = c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "once", RequestId: "retry-me-2"})
	wantStatus(t, err, codes.AlreadyExists, quirev1.ErrorCode_TOPIC_ALREADY_EXISTS, "once")
	_, err = c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "once"})
	wantStatus(t, err, codes.AlreadyExists, quirev1.ErrorCode_TOPIC_ALREADY_EXISTS, "once")
	lr, err := c.admin.ListTopics(ctx, &quirev1.ListTopicsRequest{})
	if err != nil || len(lr.Topics) != 1 || lr.Topics[0].TopicId != id {
		t.Fatalf("topics: %v %v, want one, with id %s", lr, err, id)
	}

	if _, err := c.admin.DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: "once"}); err != nil {
		t.Fatal(err)
	}
	reborn, err := c.admin.CreateTopic(ctx, req)
	if err != nil {
		t.Fatalf("the same create after the delete: %v", err)
	}
	if reborn.Topic.TopicId == "" || reborn.Topic.TopicId == id {
		t.Errorf("the same create after the delete made %v, want a new topic id (the deleted one had %s)", reborn.Topic, id)
	}
}

func TestAdminDeleteTopic(t *testing.T) {
	t.Parallel()
	_, c := start(t, noAutoCreate)
	ctx := ctxT(t)
	createTopic(t, c, "gone", 2, nil)
	produce(t, c, "gone", 0, makeBatch(3, 10, "x"))
	if _, err := c.admin.DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: "gone"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.admin.DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: []string{"gone"}})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "gone")
	_, err = c.admin.DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: "gone"})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "gone")
	_, err = c.admin.DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: "bad name"})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, "bad name")

	// A topic created again under the same name starts empty.
	createTopic(t, c, "gone", 1, nil)
	res := produce(t, c, "gone", 0, makeBatch(1, 10, "y"))
	if res.Error != nil || res.BaseOffset != 0 {
		t.Fatalf("produce to re-created topic: %+v", res)
	}
}

func TestAdminConfigs(t *testing.T) {
	t.Parallel()
	_, c := start(t, func(cfg *broker.Config) { cfg.LogRetentionBytes = 1 << 30 })
	ctx := ctxT(t)
	createTopic(t, c, "cfg", 1, map[string]string{"segment.bytes": "1048576"})
	sources := func() map[string]*quirev1.ConfigEntry {
		t.Helper()
		r, err := c.admin.DescribeConfigs(ctx, &quirev1.DescribeConfigsRequest{Topic: "cfg"})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*quirev1.ConfigEntry{}
		for _, e := range r.Configs {
			m[e.Name] = e
		}
		return m
	}
	m := sources()
	for _, k := range []string{"retention.ms", "retention.bytes", "segment.bytes", "segment.ms", "cleanup.policy", "max.message.bytes", "min.insync.replicas", "flush.messages", "flush.ms"} {
		if m[k] == nil || m[k].Documentation == "" {
			t.Errorf("missing or undocumented %s", k)
		}
	}
	check := func(k, v string, src quirev1.ConfigSource) {
		t.Helper()
		if m[k].Value != v || m[k].Source != src {
			t.Errorf("%s = %q (%v), want %q (%v)", k, m[k].Value, m[k].Source, v, src)
		}
	}
	check("segment.bytes", "1048576", quirev1.ConfigSource_CONFIG_SOURCE_TOPIC)
	check("retention.bytes", "1073741824", quirev1.ConfigSource_CONFIG_SOURCE_BROKER)
	check("retention.ms", "604800000", quirev1.ConfigSource_CONFIG_SOURCE_DEFAULT)
	check("cleanup.policy", "delete", quirev1.ConfigSource_CONFIG_SOURCE_DEFAULT)

	_, err := c.admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: "cfg", Set: map[string]string{"retention.ms": "1000"}, Delete: []string{"segment.bytes"}})
	if err != nil {
		t.Fatal(err)
	}
	m = sources()
	check("retention.ms", "1000", quirev1.ConfigSource_CONFIG_SOURCE_TOPIC)
	check("segment.bytes", "1073741824", quirev1.ConfigSource_CONFIG_SOURCE_DEFAULT)

	_, err = c.admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: "cfg", Set: map[string]string{"nope": "1"}})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, "nope")
	_, err = c.admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: "cfg", Set: map[string]string{"max.message.bytes": "-5"}})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, "max.message.bytes")
	_, err = c.admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: "cfg", Delete: []string{"nope"}})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, "nope")
	_, err = c.admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: "missing", Set: map[string]string{"retention.ms": "1"}})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "missing")
	_, err = c.admin.DescribeConfigs(ctx, &quirev1.DescribeConfigsRequest{Topic: "missing"})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "missing")

	// validate_only changes nothing.
	_, err = c.admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: "cfg", Set: map[string]string{"retention.ms": "5"}, ValidateOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	m = sources()
	check("retention.ms", "1000", quirev1.ConfigSource_CONFIG_SOURCE_TOPIC)
}

func TestAdminCreatePartitions(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "grow", 1, nil)
	r, err := c.admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "grow", TotalCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Topic.Partitions) != 3 || r.Topic.Partitions[2].Leader != 1 {
		t.Fatalf("after grow: %+v", r.Topic)
	}
	if res := produce(t, c, "grow", 2, makeBatch(2, 10, "x")); res.Error != nil {
		t.Fatalf("produce to new partition: %v", res.Error)
	}
	_, err = c.admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "grow", TotalCount: 3})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_PARTITIONS, "3")
	_, err = c.admin.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: "nope", TotalCount: 3})
	wantStatus(t, err, codes.NotFound, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "nope")
}

func TestAdminDescribeClusterAndMetadata(t *testing.T) {
	t.Parallel()
	b, c := start(t, noAutoCreate)
	ctx := ctxT(t)
	dc, err := c.admin.DescribeCluster(ctx, &quirev1.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if dc.ControllerId != 1 || len(dc.Brokers) != 1 || dc.Brokers[0].Address != b.Addr() || !dc.Brokers[0].Controller || dc.ClusterId == "" {
		t.Fatalf("cluster: %+v", dc)
	}
	createTopic(t, c, "routed", 2, nil)
	md, err := c.meta.GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{"routed", "unknown"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].Address != b.Addr() || md.ControllerId != 1 {
		t.Fatalf("brokers: %+v", md)
	}
	if len(md.Topics) != 2 || md.Topics[0].Name != "routed" || len(md.Topics[0].Partitions) != 2 || md.Topics[0].Partitions[1].Leader != 1 {
		t.Fatalf("topics: %+v", md.Topics)
	}
	wantInline(t, md.Topics[1].Error, quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, true)

	all, err := c.meta.GetMetadata(ctx, &quirev1.GetMetadataRequest{})
	if err != nil || len(all.Topics) != 1 {
		t.Fatalf("all topics: %v %v", all, err)
	}
}

func TestAdminMetadataAutoCreate(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	md, err := c.meta.GetMetadata(ctxT(t), &quirev1.GetMetadataRequest{Topics: []string{"fresh"}, AllowAutoTopicCreation: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) != 1 {
		t.Fatalf("auto-created: %+v", md.Topics)
	}
}

// TestGetMetadataMinIndex: CreateTopic answers with the index of an image
// holding the topic; GetMetadata asked for that index or older answers at
// once, and asked for one the broker's image has not reached waits, then
// refuses with REQUEST_TIMED_OUT (retriable: ask another broker).
func TestGetMetadataMinIndex(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	created, err := c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "ryw"})
	if err != nil {
		t.Fatal(err)
	}
	if created.MetadataIndex == 0 {
		t.Fatal("CreateTopic answered no metadata index")
	}
	md, err := c.meta.GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{"ryw"}, MinMetadataIndex: created.MetadataIndex})
	if err != nil || md.MetadataIndex < created.MetadataIndex || len(md.Topics) != 1 || md.Topics[0].Error != nil {
		t.Fatalf("GetMetadata at the create's index: %v %v", md, err)
	}
	// The server's own bound on the wait (request.MaxMetadataWait, 5 s) ends it,
	// far inside ctx's 30 s: a short client deadline would race the
	// server's answer against the client giving up on a loaded machine.
	_, err = c.meta.GetMetadata(ctx, &quirev1.GetMetadataRequest{MinMetadataIndex: created.MetadataIndex + 1000})
	wantStatus(t, err, codes.DeadlineExceeded, quirev1.ErrorCode_REQUEST_TIMED_OUT, "asks for")
}

// TestAdminTopicConfigSuggestsKey: an unknown topic config names the key
// it was probably meant to be: a typo's closest topic key, or the topic
// key a server key (log.retention.ms) is the default of; in CreateTopic
// and in AlterConfigs, set and deleted alike.
func TestAdminTopicConfigSuggestsKey(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "hint", 1, nil)
	for _, tc := range []struct{ key, want string }{
		{"retention.m", `unknown topic config "retention.m"; did you mean retention.ms?`},
		{"log.retention.ms", `unknown topic config "log.retention.ms"; did you mean retention.ms? (log.retention.ms is the server's default for the topic config retention.ms)`},
		{"message.max.bytes", "did you mean max.message.bytes?"},
	} {
		_, err := c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "hinted", Configs: map[string]string{tc.key: "1"}})
		wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, tc.want)
		_, err = c.admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: "hint", Set: map[string]string{tc.key: "1"}})
		wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, tc.want)
		_, err = c.admin.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: "hint", Delete: []string{tc.key}})
		wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, tc.want)
	}
	_, err := c.admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "hinted", Configs: map[string]string{"completely.unrelated.thing": "1"}})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_CONFIG, "completely.unrelated.thing")
	if strings.Contains(err.Error(), "did you mean") {
		t.Errorf("far-off key: %v, want no suggestion", err)
	}
}
