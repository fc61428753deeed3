package kafka

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

// Requests as named clients send them, byte for byte where the bytes
// are the point: each is a place where the listener once answered
// otherwise than Kafka does.

// kafkaGoSubscription is segmentio/kafka-go's (v0.4) protocol metadata
// for a subscription to topic "t": version 1, the topics, and its
// balancer's user data (empty, not null), without version 1's owned
// partitions.
var kafkaGoSubscription = []byte{
	0x00, 0x01, // version 1
	0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't', // topics: ["t"]
	0x00, 0x00, 0x00, 0x00, // user data: 0 bytes
}

// TestKafkaGoSubscriptionJoins: kafka-go's JoinGroup (v1, its range and
// round-robin balancers) joins, as on Kafka, whose coordinator checks the
// protocol type and names only, not the subscription's bytes.
func TestKafkaGoSubscriptionJoins(t *testing.T) {
	backend := &classicBackend{}
	backend.set(&request.GroupHeartbeatResult{MemberID: "m", MemberEpoch: 1}, nil)
	_, k := startServer(t, backend)
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.ProtocolType = 1, "g", "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 30000
	for _, name := range []string{"range", "roundrobin"} {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = name, kafkaGoSubscription
		req.Protocols = append(req.Protocols, p)
	}
	r := join(t, k, req)
	hb := backend.lastHeartbeat()
	if r.ErrorCode != 0 || r.MemberID == "" || r.Generation != 1 || hb == nil {
		t.Fatalf("kafka-go's join: %+v", r)
	}
	if fmt.Sprint(hb.Subscription.Topics) != "[t]" || hb.Owned != nil && len(hb.Owned.Topics) != 0 {
		t.Fatalf("kafka-go's join heartbeat: %+v", hb)
	}
}

// TestReadSubscriptionLenient: a subscription is read at the highest
// version its bytes hold in full, whatever version it claims; only bytes
// that hold no topic list are refused.
func TestReadSubscriptionLenient(t *testing.T) {
	full := kmsg.NewConsumerMemberMetadata()
	full.Version, full.Topics, full.Generation = 3, []string{"a", "b"}, 7
	op := kmsg.NewConsumerMemberMetadataOwnedPartition()
	op.Topic, op.Partitions = "a", []int32{2}
	full.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{op}
	fullBytes := full.AppendTo(nil)

	v0 := kmsg.NewConsumerMemberMetadata()
	v0.Topics = []string{"a"}
	v0Bytes := v0.AppendTo(nil)
	claims3 := append([]byte{0, 3}, v0Bytes[2:]...) // v0's fields, labelled 3
	future := append([]byte{0, 9}, append(fullBytes[2:], 1, 2, 3)...)

	for _, tc := range []struct {
		name   string
		in     []byte
		topics string
		owned  int
		ok     bool
	}{
		{"full v3", fullBytes, "[a b]", 1, true},
		{"kafka-go's v1 without owned partitions", kafkaGoSubscription, "[t]", 0, true},
		{"v0 fields labelled v3", claims3, "[a]", 0, true},
		{"a version from the future with more fields", future, "[a b]", 1, true},
		{"empty", nil, "", 0, false},
		{"a version and no topics", []byte{0, 1}, "", 0, false},
		{"a topic list cut short", []byte{0, 0, 0, 0, 0, 2, 0, 1, 'a'}, "", 0, false},
	} {
		m, err := readSubscription(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%s: error %v, want ok %v", tc.name, err, tc.ok)
			continue
		}
		if tc.ok && (fmt.Sprint(m.Topics) != tc.topics || len(m.OwnedPartitions) != tc.owned) {
			t.Errorf("%s: topics %v, owned %v; want %s, %d owned", tc.name, m.Topics, m.OwnedPartitions, tc.topics, tc.owned)
		}
	}
}

// TestKafkaGoFetchIsSessionless: kafka-go's Client.Fetch asks for no
// session (session id -1, epoch -1) and Kafka answers it in full, as it
// does any fetch at epoch -1 (the final epoch) or 0 (a new session,
// declined here), whatever session it names; a fetch continuing a
// session gets the session's error.
func TestKafkaGoFetchIsSessionless(t *testing.T) {
	backend := &fakeBackend{fetchResp: &quirev1.FetchResponse{Partitions: []*quirev1.FetchPartitionResult{
		{Topic: "t", Partition: 0, HighWatermark: 9, LogStartOffset: 1, Records: []byte("batches")}}}}
	_, k := startServer(t, backend)
	kafkaGo := func(id, epoch int32) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 11, -1, 100, 1, 1<<20
		req.SessionID, req.SessionEpoch = id, epoch
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "t"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.CurrentLeaderEpoch, fp.FetchOffset, fp.LogStartOffset, fp.PartitionMaxBytes = -1, 3, -1, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		return req
	}
	for _, tc := range []struct {
		id, epoch int32
		code      int16
	}{
		{-1, -1, 0}, // kafka-go's
		{0, -1, 0},
		{7, -1, 0},
		{7, 0, 0}, // a full fetch closes the session it names
		{7, 1, kerr.FetchSessionIDNotFound.Code},
		{-1, 3, kerr.FetchSessionIDNotFound.Code},
		{0, 1, kerr.InvalidFetchSessionEpoch.Code},
	} {
		k.request(kafkaGo(tc.id, tc.epoch))
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 11
		k.response(resp, false)
		if resp.ErrorCode != tc.code || resp.SessionID != 0 {
			t.Errorf("session %d epoch %d: code %d session %d, want code %d session 0", tc.id, tc.epoch, resp.ErrorCode, resp.SessionID, tc.code)
			continue
		}
		if tc.code == 0 && (len(resp.Topics) != 1 || string(resp.Topics[0].Partitions[0].RecordBatches) != "batches") {
			t.Errorf("session %d epoch %d: answer %+v, want the records", tc.id, tc.epoch, resp.Topics)
		}
	}
}

// assignorBackend refuses the assignors it does not allow, as the
// coordinator does those group.consumer.assignors leaves out.
type assignorBackend struct {
	classicBackend
	allowed map[string]bool
}

func (a *assignorBackend) ConsumerGroupHeartbeat(ctx context.Context, req *request.GroupHeartbeat) (*request.GroupHeartbeatResult, error) {
	resp, err := a.classicBackend.ConsumerGroupHeartbeat(ctx, req)
	a.mu.Lock()
	defer a.mu.Unlock()
	if req.Assignor != "" && !a.allowed[req.Assignor] {
		return nil, quireError(quirev1.ErrorCode_UNSUPPORTED_ASSIGNOR)
	}
	return resp, err
}

// TestKafkaClassicProtocolIsTheAssignor: a classic member's protocol
// names the coordinator's assignor, which assigns as the client's
// assignor of that name would (kafka-go's range and round-robin, the
// Java client's sticky ones); an assignor the coordinator does not allow
// falls to the member's next protocol, and a member with none allowed is
// refused rather than given another split under the name it asked for.
func TestKafkaClassicProtocolIsTheAssignor(t *testing.T) {
	backend := &assignorBackend{allowed: map[string]bool{"uniform": true, "range": true, "roundrobin": true}}
	backend.set(&request.GroupHeartbeatResult{MemberID: "m", MemberEpoch: 1}, nil)
	_, k := startServer(t, backend)
	for _, tc := range []struct {
		protocols []string
		protocol  string // answered
		assignor  string // asked of the coordinator
	}{
		{[]string{"roundrobin", "range"}, "roundrobin", "roundrobin"},
		{[]string{"range", "roundrobin"}, "range", "range"}, // kafka-go's default order
		{[]string{"range", "cooperative-sticky"}, "cooperative-sticky", "uniform"},
		{[]string{"sticky"}, "sticky", "uniform"},
		{[]string{"mine"}, "mine", ""},
	} {
		r := join(t, k, joinReq(9, "m", nil, tc.protocols...))
		hb := backend.lastHeartbeat()
		if r.ErrorCode != 0 || *r.Protocol != tc.protocol || hb.Assignor != tc.assignor {
			t.Errorf("protocols %v: code %d protocol %v, assignor %q; want %s, %q", tc.protocols, r.ErrorCode, r.Protocol, hb.Assignor, tc.protocol, tc.assignor)
		}
	}

	backend.mu.Lock()
	backend.allowed = map[string]bool{"uniform": true, "range": true}
	backend.mu.Unlock()
	r := join(t, k, joinReq(9, "m", nil, "roundrobin", "range"))
	if hb := backend.lastHeartbeat(); r.ErrorCode != 0 || *r.Protocol != "range" || hb.Assignor != "range" {
		t.Fatalf("roundrobin not allowed, then range: code %d protocol %v, assignor %q", r.ErrorCode, r.Protocol, hb.Assignor)
	}
	if r = join(t, k, joinReq(9, "m", nil, "roundrobin")); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("roundrobin alone, not allowed: code %d, want INCONSISTENT_GROUP_PROTOCOL", r.ErrorCode)
	}
}

// kafkaPythonOffsetFetch is kafka-python's OffsetFetch v1 (its consumer
// on brokers from 0.8.2, whatever their version) for group "g", topic
// "t", partitions 0 and 1: header v1, then the group and the topics.
var kafkaPythonOffsetFetch = []byte{
	0x00, 0x09, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, // OffsetFetch v1, correlation 7
	0x00, 0x0c, 'k', 'a', 'f', 'k', 'a', '-', 'p', 'y', 't', 'h', 'o', 'n', // client id
	0x00, 0x01, 'g', // group
	0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't', // one topic, "t"
	0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // partitions 0, 1
}

// failingOffsets fails every offset fetch as the coordinator out of reach.
type failingOffsets struct{ fakeBackend }

func (*failingOffsets) FetchOffsets(context.Context, string, []request.GroupPartition) ([]request.CommittedOffset, error) {
	return nil, quireError(quirev1.ErrorCode_NOT_CONTROLLER)
}

// TestKafkaPythonOffsetFetchV1: OffsetFetch v1, which Kafka 4 still
// serves and kafka-python sends (it looped forever on a connection
// closed for an unserved version), is answered; a group's error, which
// v1 has no field for, goes to each partition, as Kafka does.
func TestKafkaPythonOffsetFetchV1(t *testing.T) {
	_, k := startServer(t, &groupsBackend{})
	k.raw(kafkaPythonOffsetFetch)
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = 1
	if corr := k.response(resp, false); corr != 7 {
		t.Fatalf("correlation %d", corr)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("OffsetFetch v1: %+v", resp.Topics)
	}
	ps := resp.Topics[0].Partitions
	if ps[0].Offset != -1 || ps[0].ErrorCode != 0 || ps[1].Offset != 42 || *ps[1].Metadata != "m" || ps[1].ErrorCode != 0 {
		t.Fatalf("OffsetFetch v1 partitions: %+v", ps)
	}

	_, k = startServer(t, &failingOffsets{})
	k.raw(kafkaPythonOffsetFetch)
	resp = kmsg.NewPtrOffsetFetchResponse()
	resp.Version = 1
	k.response(resp, false)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("OffsetFetch v1 failed: %+v", resp.Topics)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.CoordinatorNotAvailable.Code || p.Offset != -1 {
			t.Errorf("OffsetFetch v1 failed: partition %+v, want offset -1 and COORDINATOR_NOT_AVAILABLE", p)
		}
	}

	// Version 0 read ZooKeeper's offsets, which no client commits to
	// here: not served, as on Kafka 4.
	if served(9, 0) || !served(9, 1) {
		t.Fatal("OffsetFetch v0 served, or v1 not")
	}
}

// autoCreating answers metadata for the topics it has, creating those
// asked for when the request allows it.
type autoCreating struct {
	fakeBackend
	topics  map[string]bool
	created []string
}

func (a *autoCreating) Metadata(_ context.Context, in *request.MetadataRequest) (*request.MetadataResult, error) {
	req := metadataRequest(in)
	a.mu.Lock()
	defer a.mu.Unlock()
	out := &quirev1.GetMetadataResponse{ClusterId: "c", Brokers: []*quirev1.Broker{{Id: 1, Address: "127.0.0.1:9092"}}}
	for _, name := range req.Topics {
		if !a.topics[name] && req.AllowAutoTopicCreation {
			a.topics[name] = true
			a.created = append(a.created, name)
		}
		tm := &quirev1.TopicMetadata{Name: name}
		if a.topics[name] {
			tm.Partitions = []*quirev1.PartitionMetadata{{Partition: 0, Leader: 1, Replicas: []int32{1}, Isr: []int32{1}}}
		} else {
			tm.Error = &quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}
		}
		out.Topics = append(out.Topics, tm)
	}
	return coreMetadata(out), nil
}

// TestKafkaMetadataInternalTopicsNotCreated: a metadata request naming
// Kafka's internal topics, which clients and tools probe, with
// auto-creation allowed (always, before v4, as kafka-python's v1) does
// not create them as ordinary empty topics: groups' offsets live in the
// metadata log here, and there are no transactions. They are answered
// UNKNOWN_TOPIC_OR_PARTITION, as a Kafka cluster whose internal topics
// do not exist yet answers; the other topics named are created as asked,
// and an internal name made by hand is shown as any topic.
func TestKafkaMetadataInternalTopicsNotCreated(t *testing.T) {
	backend := &autoCreating{topics: map[string]bool{}}
	_, k := startServer(t, backend)
	ask := func(version int16, names ...string) map[string]int16 {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation = version, true
		for _, n := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
		k.request(req)
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = version
		k.response(resp, version >= 9)
		got := map[string]int16{}
		for _, t := range resp.Topics {
			got[*t.Topic] = t.ErrorCode
		}
		return got
	}
	for _, version := range []int16{1, 12} {
		got := ask(version, "__consumer_offsets", "t", "__transaction_state")
		want := map[string]int16{"__consumer_offsets": kerr.UnknownTopicOrPartition.Code, "t": 0, "__transaction_state": kerr.UnknownTopicOrPartition.Code}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("metadata v%d: %v, want %v", version, got, want)
		}
	}
	if got := ask(12, "__consumer_offsets"); len(got) != 1 || got["__consumer_offsets"] != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("metadata v12 for __consumer_offsets alone: %v", got)
	}
	backend.mu.Lock()
	created := fmt.Sprint(backend.created)
	backend.topics["__consumer_offsets"] = true // made by hand
	backend.mu.Unlock()
	if created != "[t]" {
		t.Fatalf("created %s, want [t]", created)
	}
	if got := ask(12, "__consumer_offsets"); got["__consumer_offsets"] != 0 {
		t.Errorf("an internal name made by hand: %v", got)
	}
}

// TestKafkaTransactionsRefusedClearly: a transactional producer's first
// requests, as franz-go sends them (FindCoordinator v4 for its
// transactional id, then InitProducerId v4 naming it), are refused with
// UNSUPPORTED_VERSION, which franz-go and the Java client take as final,
// and where the version has a message field a message that says why;
// not INVALID_REQUEST, which says the client sent a malformed request,
// nor TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which points at ACLs.
func TestKafkaTransactionsRefusedClearly(t *testing.T) {
	_, k := startServer(t, &fakeBackend{})
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 1, []string{"my-txn"}
	k.request(fc)
	fr := kmsg.NewPtrFindCoordinatorResponse()
	fr.Version = 4
	k.response(fr, true)
	if len(fr.Coordinators) != 1 {
		t.Fatalf("FindCoordinator v4: %+v", fr)
	}
	c := fr.Coordinators[0]
	if c.Key != "my-txn" || c.ErrorCode != kerr.UnsupportedVersion.Code || c.ErrorMessage == nil || !strings.Contains(*c.ErrorMessage, "transactions are not supported") {
		t.Fatalf("FindCoordinator for a transactional id: %+v", c)
	}

	// librdkafka's and the Java client's FindCoordinator v1-3: one key.
	fc = kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKey = 2, 1, "my-txn"
	k.request(fc)
	fr = kmsg.NewPtrFindCoordinatorResponse()
	fr.Version = 2
	k.response(fr, false)
	if fr.ErrorCode != kerr.UnsupportedVersion.Code || fr.ErrorMessage == nil || !strings.Contains(*fr.ErrorMessage, "transactions are not supported") {
		t.Fatalf("FindCoordinator v2 for a transactional id: code %d message %v", fr.ErrorCode, fr.ErrorMessage)
	}

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version, ip.TransactionalID, ip.TransactionTimeoutMillis, ip.ProducerID, ip.ProducerEpoch = 4, kmsg.StringPtr("my-txn"), 40000, -1, -1
	k.request(ip)
	ir := kmsg.NewPtrInitProducerIDResponse()
	ir.Version = 4
	k.response(ir, true)
	if ir.ErrorCode != kerr.UnsupportedVersion.Code || ir.ProducerID != -1 || ir.ProducerEpoch != -1 {
		t.Fatalf("InitProducerId with a transactional id: %+v", ir)
	}

	// A coordinator type Kafka does not have is the request's fault.
	fc = kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKeys = 4, 7, []string{"k"}
	k.request(fc)
	fr = kmsg.NewPtrFindCoordinatorResponse()
	fr.Version = 4
	k.response(fr, true)
	if fr.Coordinators[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("coordinator type 7: %+v", fr.Coordinators[0])
	}
}
