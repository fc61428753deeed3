package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	qmetadata "github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
)

// wantAdminVersions are the admin APIs' versions ApiVersions must
// advertise (TestKafkaApiVersions checks them with the others).
var wantAdminVersions = map[int16][2]int16{
	19: {0, 7}, 20: {0, 6}, 37: {0, 3}, 32: {0, 4}, 33: {0, 2}, 44: {0, 1}, 60: {0, 2}, 42: {0, 2}, 69: {0, 1},
	29: {0, 3}, 30: {0, 3}, 31: {0, 3}, 50: {0, 0}, 51: {0, 0}, 61: {0, 0}, 35: {0, 4}, 43: {0, 2}, 47: {0, 0},
	45: {0, 1}, 46: {0, 0},
}

// errUnimplemented is fakeBackend's answer to the admin calls: the
// tests of the other APIs do not reach them.
func errUnimplemented() error { return errors.New("no admin here") }

func (f *fakeBackend) CreateTopic(context.Context, *request.CreateTopicRequest) (*request.CreateTopicResult, error) {
	return nil, errUnimplemented()
}
func (f *fakeBackend) DeleteTopic(context.Context, string, string) error {
	return errUnimplemented()
}
func (f *fakeBackend) CreatePartitions(context.Context, *request.CreatePartitionsRequest) (*request.CreatePartitionsResult, error) {
	return nil, errUnimplemented()
}
func (f *fakeBackend) DescribeCluster(context.Context) (*request.ClusterDescription, error) {
	return nil, errUnimplemented()
}
func (f *fakeBackend) TopicConfigs(context.Context, string) ([]ConfigEntry, error) {
	return nil, errUnimplemented()
}
func (f *fakeBackend) BrokerConfigs(context.Context, string) ([]ConfigEntry, error) {
	return nil, errUnimplemented()
}
func (f *fakeBackend) AlterConfigs(context.Context, *request.AlterConfigsRequest) error {
	return errUnimplemented()
}
func (f *fakeBackend) GroupConfigs(context.Context, string) ([]ConfigEntry, error) {
	return nil, errUnimplemented()
}
func (f *fakeBackend) AlterGroupConfigs(context.Context, *request.AlterShareGroupConfigsRequest) error {
	return errUnimplemented()
}
func (f *fakeBackend) DeleteGroup(context.Context, string) error {
	return errUnimplemented()
}
func (f *fakeBackend) CreateAcls(context.Context, []request.ACL) error {
	return errUnimplemented()
}
func (f *fakeBackend) ListAcls(context.Context, request.ACL) ([]request.ACL, error) {
	return nil, errUnimplemented()
}
func (f *fakeBackend) DeleteAcls(context.Context, []request.ACL) ([]request.ACL, error) {
	return nil, errUnimplemented()
}
func (f *fakeBackend) ListUsers(context.Context) ([]request.UserDescription, error) {
	return nil, errUnimplemented()
}
func (f *fakeBackend) DeleteScramCredential(context.Context, string, string) error {
	return errUnimplemented()
}
func (f *fakeBackend) UpsertScramCredential(context.Context, string, string, int32, []byte, []byte) error {
	return errUnimplemented()
}
func (f *fakeBackend) DescribeProducers(context.Context, string, []int32) ([]request.PartitionProducers, error) {
	return nil, errUnimplemented()
}
func (f *fakeBackend) LogDirs(context.Context) ([]request.LogDir, error) {
	return nil, errUnimplemented()
}

// quireErr is the core's refusal with code and msg.
func quireErr(code quirev1.ErrorCode, msg string) error {
	return &request.Error{Code: int32(code), Message: msg, LeaderID: -1, LeaderEpoch: -1}
}

// adminBackend keeps topics, configs, ACLs and users in memory, as the
// admin handlers would, and records the calls.
type adminBackend struct {
	fakeBackend
	mu     sync.Mutex
	topics map[string]*quirev1.TopicDescription
	acls   []request.ACL
	users  map[string]int32 // SCRAM-SHA-256 iterations
	// users512 are the SCRAM-SHA-512 iterations of the users with
	// those keys.
	users512 map[string]int32
	// passwordUsers are the users whose credential came from a
	// password (both mechanisms' keys), not a salted one.
	passwordUsers map[string]bool
	calls         []string
	created       []*request.CreateTopicRequest
	// beforeDelete, when set, runs as DeleteTopic starts (the lock
	// held): after the listener looked a topic id up, before the delete.
	beforeDelete func(name string)
}

func newAdminBackend() *adminBackend {
	a := &adminBackend{topics: map[string]*quirev1.TopicDescription{}, users: map[string]int32{"alice": 8192}, users512: map[string]int32{}}
	a.topics["existing"] = a.describe("existing", 2, 1, map[string]string{"retention.ms": "1000"})
	return a
}

func (a *adminBackend) describe(name string, parts, rf int, configs map[string]string) *quirev1.TopicDescription {
	id := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%016s", name))[:16])
	d := &quirev1.TopicDescription{Name: name, TopicId: id, Configs: configs}
	for p := range parts {
		pd := &quirev1.PartitionDescription{Partition: int32(p), Leader: 1}
		for r := range rf {
			pd.Replicas = append(pd.Replicas, int32(r+1))
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d
}

func (a *adminBackend) record(format string, args ...any) {
	a.calls = append(a.calls, fmt.Sprintf(format, args...))
}

func (a *adminBackend) CreateTopic(_ context.Context, req *request.CreateTopicRequest) (*request.CreateTopicResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.created = append(a.created, req)
	if _, ok := a.topics[req.Name]; ok {
		return nil, coreErr(&quirev1.Error{Code: quirev1.ErrorCode_TOPIC_ALREADY_EXISTS, Message: fmt.Sprintf("topic %q exists", req.Name)})
	}
	for k := range req.Configs {
		if !strings.Contains(k, ".") {
			return nil, coreErr(&quirev1.Error{Code: quirev1.ErrorCode_INVALID_CONFIG, Message: fmt.Sprintf("unknown topic config %q", k)})
		}
	}
	parts, rf := 4, 3 // the broker's defaults
	if req.Partitions != nil {
		parts = int(*req.Partitions)
	}
	if req.ReplicationFactor != nil {
		rf = int(*req.ReplicationFactor)
	}
	d := a.describe(req.Name, parts, rf, req.Configs)
	if req.ValidateOnly {
		return &request.CreateTopicResult{Topic: request.TopicDescription{Name: req.Name}}, nil
	}
	a.topics[req.Name] = d
	out := request.TopicDescription{Name: d.Name, ID: d.TopicId, Configs: d.Configs}
	for _, p := range d.Partitions {
		out.Partitions = append(out.Partitions, request.PartitionDescription{Partition: p.Partition, Leader: p.Leader, Replicas: p.Replicas})
	}
	return &request.CreateTopicResult{Topic: out}, nil
}

func (a *adminBackend) DeleteTopic(_ context.Context, name, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.record("delete %s", name)
	if a.beforeDelete != nil {
		a.beforeDelete(name)
	}
	if t, ok := a.topics[name]; !ok || (id != "" && t.TopicId != id) {
		return coreErr(&quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: fmt.Sprintf("unknown topic %q (id %q)", name, id)})
	}
	delete(a.topics, name)
	return nil
}

func (a *adminBackend) CreatePartitions(_ context.Context, req *request.CreatePartitionsRequest) (*request.CreatePartitionsResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.record("partitions %s %d %v", req.Topic, req.TotalCount, req.ValidateOnly)
	t, ok := a.topics[req.Topic]
	switch {
	case !ok:
		return nil, coreErr(&quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: "unknown topic"})
	case int(req.TotalCount) <= len(t.Partitions):
		return nil, coreErr(&quirev1.Error{Code: quirev1.ErrorCode_INVALID_PARTITIONS, Message: "must be larger"})
	}
	return &request.CreatePartitionsResult{}, nil
}

func (a *adminBackend) Metadata(_ context.Context, in *request.MetadataRequest) (*request.MetadataResult, error) {
	req := metadataRequest(in)
	a.mu.Lock()
	defer a.mu.Unlock()
	out := &quirev1.GetMetadataResponse{}
	for _, t := range a.topics {
		if len(req.Topics) > 0 && !slices.Contains(req.Topics, t.Name) {
			continue
		}
		tm := &quirev1.TopicMetadata{Name: t.Name, TopicId: t.TopicId}
		for _, p := range t.Partitions {
			tm.Partitions = append(tm.Partitions, &quirev1.PartitionMetadata{Partition: p.Partition, Leader: p.Leader, Replicas: p.Replicas})
		}
		out.Topics = append(out.Topics, tm)
	}
	return coreMetadata(out), nil
}

func (a *adminBackend) DescribeCluster(context.Context) (*request.ClusterDescription, error) {
	return &request.ClusterDescription{ClusterID: "qc", ControllerID: 2, Brokers: []request.BrokerDescription{
		{Info: qmetadata.BrokerInfo{ID: 1, Addr: "10.0.0.1:9093", Rack: "r1"}}, {Info: qmetadata.BrokerInfo{ID: 2, Addr: "10.0.0.2:9093", Fenced: true}}}}, nil
}

// TopicConfigs: retention.ms (a long, the broker's default changed) and
// cleanup.policy (a list), with the topic's overrides.
func (a *adminBackend) TopicConfigs(_ context.Context, topic string) ([]ConfigEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.topics[topic]
	if !ok {
		return nil, quireErr(quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("unknown topic %q", topic))
	}
	ret := ConfigEntry{Name: "retention.ms", Value: "5000", Source: SourceStaticBroker, Type: configTypeLong, Doc: "how long",
		Synonyms: []ConfigSynonym{{Name: "log.retention.ms", Value: "5000", Source: SourceStaticBroker}, {Name: "log.retention.ms", Value: "604800000", Source: SourceDefault}}}
	if v, ok := t.Configs["retention.ms"]; ok {
		ret.Value, ret.Source = v, SourceDynamicTopic
		ret.Synonyms = append([]ConfigSynonym{{Name: "retention.ms", Value: v, Source: SourceDynamicTopic}}, ret.Synonyms...)
	}
	cp := ConfigEntry{Name: "cleanup.policy", Value: "delete", Source: SourceDefault, Type: configTypeList, Doc: "what to do"}
	if v, ok := t.Configs["cleanup.policy"]; ok {
		cp.Value, cp.Source = v, SourceDynamicTopic
	}
	return []ConfigEntry{ret, cp}, nil
}

func (a *adminBackend) BrokerConfigs(_ context.Context, broker string) ([]ConfigEntry, error) {
	if broker != "1" {
		return nil, quireErr(quirev1.ErrorCode_INVALID_REQUEST, "this is broker 1")
	}
	return []ConfigEntry{{Name: "num.partitions", Value: "4", Source: SourceStaticBroker, ReadOnly: true, Type: configTypeLong}}, nil
}

func (a *adminBackend) AlterConfigs(_ context.Context, req *request.AlterConfigsRequest) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	set := make([]string, 0, len(req.Set))
	for k, v := range req.Set {
		set = append(set, k+"="+v)
	}
	sort.Strings(set)
	del := slices.Clone(req.Delete)
	sort.Strings(del)
	a.record("alter %s set %v delete %v validate %v", req.Topic, set, del, req.ValidateOnly)
	if v, ok := req.Set["cleanup.policy"]; ok && v != "delete" {
		return coreErr(&quirev1.Error{Code: quirev1.ErrorCode_INVALID_CONFIG, Message: fmt.Sprintf("cleanup.policy=%q: only delete", v)})
	}
	return nil
}

// refusal is an error of the request core with a quire.v1 code.
func refusal(code quirev1.ErrorCode, msg string) error {
	return &request.Error{Code: int32(code), Message: msg}
}

func (a *adminBackend) DeleteGroup(_ context.Context, group string) error {
	switch group {
	case "busy":
		return refusal(quirev1.ErrorCode_NON_EMPTY_GROUP, "group busy has members")
	case "gone":
		return refusal(quirev1.ErrorCode_GROUP_ID_NOT_FOUND, "no group gone")
	}
	return nil
}

func (a *adminBackend) CreateAcls(_ context.Context, acls []request.ACL) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, acl := range acls {
		if !strings.HasPrefix(acl.Principal, "User:") {
			return refusal(quirev1.ErrorCode_INVALID_REQUEST, fmt.Sprintf("principal %q", acl.Principal))
		}
	}
	a.acls = append(a.acls, acls...)
	return nil
}

// matches is the Security service's filter: empty fields match anything.
func matches(f, a request.ACL) bool {
	eq := func(x, y string) bool { return x == "" || strings.EqualFold(x, y) }
	return eq(f.Principal, a.Principal) && eq(f.Permission, a.Permission) && eq(f.Operation, a.Operation) &&
		eq(f.ResourceType, a.ResourceType) && (f.ResourceName == "" || f.ResourceName == a.ResourceName) && eq(f.PatternType, a.PatternType)
}

func (a *adminBackend) ListAcls(_ context.Context, filter request.ACL) ([]request.ACL, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []request.ACL
	for _, acl := range a.acls {
		if matches(filter, acl) {
			out = append(out, acl)
		}
	}
	return out, nil
}

func (a *adminBackend) DeleteAcls(_ context.Context, filters []request.ACL) ([]request.ACL, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []request.ACL
	a.acls = slices.DeleteFunc(a.acls, func(acl request.ACL) bool {
		for _, f := range filters {
			if matches(f, acl) {
				out = append(out, acl)
				return true
			}
		}
		return false
	})
	return out, nil
}

func (a *adminBackend) ListUsers(context.Context) ([]request.UserDescription, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []request.UserDescription
	names := map[string]bool{}
	for u := range a.users {
		names[u] = true
	}
	for u := range a.users512 {
		names[u] = true
	}
	for u := range names {
		d := request.UserDescription{Name: u}
		if it, ok := a.users[u]; ok {
			d.Credentials = append(d.Credentials, request.ScramCredentialInfo{Mechanism: "SCRAM-SHA-256", Iterations: it})
			if a.passwordUsers[u] { // set from a password over gRPC: both keys
				d.Credentials = append(d.Credentials, request.ScramCredentialInfo{Mechanism: "SCRAM-SHA-512", Iterations: it})
			}
		}
		if it, ok := a.users512[u]; ok {
			d.Credentials = append(d.Credentials, request.ScramCredentialInfo{Mechanism: "SCRAM-SHA-512", Iterations: it})
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (a *adminBackend) mechUsers(mechanism string) map[string]int32 {
	if mechanism == "SCRAM-SHA-512" {
		return a.users512
	}
	return a.users
}

func (a *adminBackend) DeleteScramCredential(_ context.Context, name, mechanism string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.mechUsers(mechanism)
	if _, ok := m[name]; !ok {
		return refusal(quirev1.ErrorCode_RESOURCE_NOT_FOUND, fmt.Sprintf("user %q has no %s credential", name, mechanism))
	}
	delete(m, name)
	return nil
}

func (a *adminBackend) UpsertScramCredential(_ context.Context, user, mechanism string, iterations int32, salt, salted []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	size := 32
	if mechanism == "SCRAM-SHA-512" {
		size = 64
	}
	if len(salted) != size || len(salt) == 0 {
		return refusal(quirev1.ErrorCode_INVALID_REQUEST, fmt.Sprintf("salted password of %d bytes", size))
	}
	a.mechUsers(mechanism)[user] = iterations
	return nil
}

func (a *adminBackend) DescribeProducers(_ context.Context, topic string, _ []int32) ([]request.PartitionProducers, error) {
	if topic != "existing" {
		return nil, coreErr(&quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: "unknown topic"})
	}
	return []request.PartitionProducers{
		{Partition: 0, Producers: []request.ProducerDescription{{ProducerID: 9, ProducerEpoch: 1, LastSequence: 4, LastTimestamp: 77, CoordinatorEpoch: -1, TxnStartOffset: -1}}},
		{Partition: 1, Err: &request.Error{Code: int32(quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER), Message: "led by 2", LeaderID: 2, LeaderEpoch: -1}},
	}, nil
}

func (a *adminBackend) LogDirs(context.Context) ([]request.LogDir, error) {
	return []request.LogDir{{Path: "/data", TotalBytes: -1, UsableBytes: -1, Partitions: []request.LogDirPartition{
		{Topic: "existing", Partition: 0, Size: 100}, {Topic: "existing", Partition: 1, Size: 50, OffsetLag: 2}, {Topic: "other", Partition: 0, Size: 7}}}}, nil
}

// roundTrip sends req and reads its answer.
func roundTrip[R kmsg.Response](k *kconn, req kmsg.Request) R {
	k.t.Helper()
	k.request(req)
	resp := req.ResponseKind().(R)
	resp.SetVersion(req.GetVersion())
	k.response(resp, req.IsFlexible())
	return resp
}

func errName(code int16) string {
	if code == 0 {
		return "OK"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}

func TestKafkaCreateTopics(t *testing.T) {
	backend := newAdminBackend()
	_, k := startServer(t, backend)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	topic := func(name string, parts int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, parts, rf
		for i := 0; i+1 < len(configs); i += 2 {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
			t.Configs = append(t.Configs, c)
		}
		return t
	}
	assigned := topic("assigned", -1, -1)
	assigned.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1}}}
	nullCfg := topic("nullcfg", 1, 1)
	nullCfg.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms"}}
	req.Topics = []kmsg.CreateTopicsRequestTopic{
		topic("defaults", -1, -1), topic("explicit", 2, 1, "retention.ms", "1000"), topic("dup", 1, 1), topic("dup", 1, 1),
		assigned, nullCfg, topic("existing", 1, 1), topic("badcfg", 1, 1, "nope", "1"),
	}
	resp := roundTrip[*kmsg.CreateTopicsResponse](k, req)
	want := map[string]int16{"defaults": 0, "explicit": 0, "dup": kerr.InvalidRequest.Code, "assigned": kerr.InvalidRequest.Code,
		"nullcfg": kerr.InvalidConfig.Code, "existing": kerr.TopicAlreadyExists.Code, "badcfg": kerr.InvalidConfig.Code}
	if len(resp.Topics) != len(req.Topics) {
		t.Fatalf("%d topics answered, want %d", len(resp.Topics), len(req.Topics))
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != want[rt.Topic] {
			t.Errorf("topic %s: %s (%v), want %s", rt.Topic, errName(rt.ErrorCode), rt.ErrorMessage, errName(want[rt.Topic]))
		}
		if rt.ErrorCode != 0 && (rt.ErrorMessage == nil || *rt.ErrorMessage == "") {
			t.Errorf("topic %s: error %s without a message", rt.Topic, errName(rt.ErrorCode))
		}
	}
	// -1 is the broker's defaults: neither count is passed on; the
	// answer (v5+) carries what was created, its id (v7) and configs.
	def := resp.Topics[0]
	if def.NumPartitions != 4 || def.ReplicationFactor != 3 || def.TopicID == [16]byte{} || len(def.Configs) != 2 {
		t.Errorf("defaults topic answered %d partitions, rf %d, id %x, %d configs; want 4, 3, an id, 2", def.NumPartitions, def.ReplicationFactor, def.TopicID, len(def.Configs))
	}
	if c := backend.created[0]; c.Partitions != nil || c.ReplicationFactor != nil {
		t.Errorf("-1 passed on as %v/%v, want unset", c.Partitions, c.ReplicationFactor)
	}
	if c := backend.created[1]; c.Partitions == nil || *c.Partitions != 2 || c.ReplicationFactor == nil || *c.ReplicationFactor != 1 || c.Configs["retention.ms"] != "1000" {
		t.Errorf("explicit topic passed on as %v", c)
	}
	if _, ok := backend.topics["dup"]; ok {
		t.Error("a topic named twice was created")
	}

	// validate_only creates nothing; v0 answers without messages.
	req = kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.ValidateOnly = 4, true
	req.Topics = []kmsg.CreateTopicsRequestTopic{topic("dry", 1, 1)}
	if resp := roundTrip[*kmsg.CreateTopicsResponse](k, req); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("validate-only: %s", errName(resp.Topics[0].ErrorCode))
	}
	if _, ok := backend.topics["dry"]; ok || !backend.created[len(backend.created)-1].ValidateOnly {
		t.Error("a validate-only create made the topic, or was not passed on as one")
	}
	req.Version = 0
	req.Topics = []kmsg.CreateTopicsRequestTopic{topic("existing", 1, 1)}
	if resp := roundTrip[*kmsg.CreateTopicsResponse](k, req); resp.Topics[0].ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("v0 existing: %s", errName(resp.Topics[0].ErrorCode))
	}
}

func TestKafkaDeleteTopicsAndCreatePartitions(t *testing.T) {
	backend := newAdminBackend()
	backend.topics["byid"] = backend.describe("byid", 1, 1, nil)
	backend.topics["byname"] = backend.describe("byname", 1, 1, nil)
	// A topic from before topics had ids: the zero id must not name it.
	backend.topics["noid"] = backend.describe("noid", 1, 1, nil)
	backend.topics["noid"].TopicId = ""
	_, k := startServer(t, backend)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	id := topicID(backend.topics["byid"].TopicId)
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("byname")}, {TopicID: id}, {TopicID: [16]byte{9}}, {Topic: kmsg.StringPtr("nope")}, {}}
	resp := roundTrip[*kmsg.DeleteTopicsResponse](k, req)
	got := []string{}
	for _, rt := range resp.Topics {
		name := "<nil>"
		if rt.Topic != nil {
			name = *rt.Topic
		}
		got = append(got, name+":"+errName(rt.ErrorCode))
	}
	want := []string{"byname:OK", "byid:OK", "<nil>:" + errName(kerr.UnknownTopicID.Code), "nope:" + errName(kerr.UnknownTopicOrPartition.Code),
		"<nil>:" + errName(kerr.UnknownTopicID.Code)}
	if !slices.Equal(got, want) {
		t.Fatalf("DeleteTopics v6: %v, want %v", got, want)
	}
	if _, ok := backend.topics["noid"]; !ok {
		t.Error("the zero topic id deleted a topic without an id")
	}
	if resp.Topics[1].TopicID != id {
		t.Errorf("a topic deleted by id answered with id %x, want %x", resp.Topics[1].TopicID, id)
	}
	if _, ok := backend.topics["byid"]; ok {
		t.Error("topic deleted by id still there")
	}

	// Deleted and created again between the listener's lookup of the id
	// and the delete: the new incarnation stays, and the id is unknown.
	backend.topics["again"] = backend.describe("again", 1, 1, nil)
	oldID := topicID(backend.topics["again"].TopicId)
	backend.beforeDelete = func(name string) {
		if name == "again" {
			d := backend.describe("again", 1, 1, nil)
			d.TopicId = base64.RawURLEncoding.EncodeToString([]byte("again, recreated")[:16])
			backend.topics["again"] = d
		}
	}
	req = kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: oldID}}
	resp = roundTrip[*kmsg.DeleteTopicsResponse](k, req)
	backend.beforeDelete = nil
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("DeleteTopics by the id of a topic recreated since: %+v, want UNKNOWN_TOPIC_ID", resp.Topics)
	}
	if d, ok := backend.topics["again"]; !ok || topicID(d.TopicId) == oldID {
		t.Fatal("the topic's new incarnation was deleted by the old one's id")
	}

	req = kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TopicNames = 1, []string{"existing", "existing"}
	if resp := roundTrip[*kmsg.DeleteTopicsResponse](k, req); len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("DeleteTopics v1 of a topic named twice: %+v", resp.Topics)
	}
	if _, ok := backend.topics["existing"]; !ok {
		t.Fatal("a topic named twice was deleted")
	}

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Version, cp.ValidateOnly = 3, true
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "existing", Count: 5}, {Topic: "existing2", Count: 5},
		{Topic: "assigned", Count: 3, Assignment: []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{1}}}}}
	cpr := roundTrip[*kmsg.CreatePartitionsResponse](k, cp)
	codes := []int16{cpr.Topics[0].ErrorCode, cpr.Topics[1].ErrorCode, cpr.Topics[2].ErrorCode}
	if !slices.Equal(codes, []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidReplicaAssignment.Code}) {
		t.Fatalf("CreatePartitions: codes %v", codes)
	}
	if !slices.Contains(backend.calls, "partitions existing 5 true") {
		t.Fatalf("CreatePartitions not passed on as validate-only: %v", backend.calls)
	}
}

func TestKafkaDescribeCluster(t *testing.T) {
	_, k := startServer(t, newAdminBackend())
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version, req.EndpointType = 1, 1
	resp := roundTrip[*kmsg.DescribeClusterResponse](k, req)
	if resp.ErrorCode != 0 || resp.ClusterID != "qc" || resp.ControllerID != 2 || len(resp.Brokers) != 1 ||
		resp.Brokers[0].Host != "10.0.0.1" || resp.Brokers[0].Port != 9093 || *resp.Brokers[0].Rack != "r1" {
		t.Fatalf("DescribeCluster v1: %+v", resp)
	}
	req.Version, req.IncludeFencedBrokers = 2, true
	if resp := roundTrip[*kmsg.DescribeClusterResponse](k, req); len(resp.Brokers) != 2 || !resp.Brokers[1].IsFenced {
		t.Fatalf("DescribeCluster v2 with the fenced: %+v", resp.Brokers)
	}
	req.EndpointType = 2
	if resp := roundTrip[*kmsg.DescribeClusterResponse](k, req); resp.ErrorCode != kerr.UnsupportedEndpointType.Code || resp.ErrorMessage == nil {
		t.Fatalf("DescribeCluster of the controllers: %s", errName(resp.ErrorCode))
	}
}

func TestKafkaDescribeConfigs(t *testing.T) {
	_, k := startServer(t, newAdminBackend())
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version, req.IncludeSynonyms, req.IncludeDocumentation = 4, true, true
	res := func(typ kmsg.ConfigResourceType, name string, keys ...string) kmsg.DescribeConfigsRequestResource {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, keys
		return r
	}
	req.Resources = []kmsg.DescribeConfigsRequestResource{res(2, "existing"), res(2, "existing2", "retention.ms"),
		res(4, "1"), res(4, "2"), res(8, "1"), res(3, "x")}
	resp := roundTrip[*kmsg.DescribeConfigsResponse](k, req)
	var codes []int16
	for _, r := range resp.Resources {
		codes = append(codes, r.ErrorCode)
		if r.ErrorCode != 0 && r.ErrorMessage == nil {
			t.Errorf("%s %s: error without a message", r.ResourceType, r.ResourceName)
		}
	}
	if want := []int16{0, kerr.UnknownTopicOrPartition.Code, 0, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}; !slices.Equal(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}
	topic := resp.Resources[0].Configs
	if len(topic) != 2 {
		t.Fatalf("topic configs: %+v", topic)
	}
	ret := topic[0]
	if ret.Name != "retention.ms" || *ret.Value != "1000" || ret.Source != kmsg.ConfigSourceDynamicTopicConfig ||
		ret.ConfigType != kmsg.ConfigTypeLong || ret.Documentation == nil || *ret.Documentation != "how long" || len(ret.ConfigSynonyms) != 3 ||
		ret.ConfigSynonyms[1].Name != "log.retention.ms" || ret.ConfigSynonyms[1].Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("retention.ms: %+v", ret)
	}
	if b := resp.Resources[2].Configs; len(b) != 1 || !b[0].ReadOnly || *b[0].Value != "4" {
		t.Errorf("broker configs: %+v", b)
	}

	// Without synonyms and documentation asked for, and in v0 (is_default).
	req.IncludeSynonyms, req.IncludeDocumentation = false, false
	req.Resources = []kmsg.DescribeConfigsRequestResource{res(2, "existing", "cleanup.policy")}
	resp = roundTrip[*kmsg.DescribeConfigsResponse](k, req)
	if c := resp.Resources[0].Configs; len(c) != 1 || c[0].Name != "cleanup.policy" || c[0].ConfigSynonyms != nil || c[0].Documentation != nil {
		t.Errorf("cleanup.policy without synonyms: %+v", c)
	}
	req.Version = 0
	resp = roundTrip[*kmsg.DescribeConfigsResponse](k, req)
	if c := resp.Resources[0].Configs; len(c) != 1 || !c[0].IsDefault {
		t.Errorf("v0 cleanup.policy is not default: %+v", c)
	}
}

func TestKafkaAlterConfigs(t *testing.T) {
	backend := newAdminBackend()
	_, k := startServer(t, backend)
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	inc.Version = 1
	cfg := func(name string, op kmsg.IncrementalAlterConfigOp, v *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, op, v
		return c
	}
	res := func(typ kmsg.ConfigResourceType, name string, cs ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsRequestResource {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.Configs = typ, name, cs
		return r
	}
	inc.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		res(2, "existing", cfg("retention.ms", 0, kmsg.StringPtr("2000")), cfg("cleanup.policy", 2, kmsg.StringPtr("delete"))),
		res(2, "existing", cfg("retention.ms", 1, nil)), // named twice
	}
	resp := roundTrip[*kmsg.IncrementalAlterConfigsResponse](k, inc)
	if resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code || resp.Resources[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("a resource named twice: %s, %s", errName(resp.Resources[0].ErrorCode), errName(resp.Resources[1].ErrorCode))
	}
	backend.topics["other"] = backend.describe("other", 1, 1, map[string]string{"cleanup.policy": "delete"})
	inc.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		res(2, "existing", cfg("retention.ms", 0, kmsg.StringPtr("2000")), cfg("cleanup.policy", 2, kmsg.StringPtr("delete,compact"))),
		res(2, "existing2", cfg("retention.ms", 1, nil)),
		res(2, "other", cfg("retention.ms", 2, kmsg.StringPtr("1"))),
		res(4, "1", cfg("num.partitions", 0, kmsg.StringPtr("8"))),
	}
	resp = roundTrip[*kmsg.IncrementalAlterConfigsResponse](k, inc)
	var codes []int16
	for _, r := range resp.Resources {
		codes = append(codes, r.ErrorCode)
		if r.ErrorCode != 0 && (r.ErrorMessage == nil || *r.ErrorMessage == "") {
			t.Errorf("%s: error without a message", r.ResourceName)
		}
	}
	// APPEND to a list gives its union, refused by the (fake) broker's
	// check; APPEND to a long is refused here; a broker key is static.
	want := []int16{kerr.InvalidConfig.Code, kerr.UnknownTopicOrPartition.Code, kerr.InvalidConfig.Code, kerr.InvalidRequest.Code}
	if !slices.Equal(codes, want) {
		t.Fatalf("IncrementalAlterConfigs codes %v, want %v", codes, want)
	}
	if !slices.Contains(backend.calls, "alter existing set [cleanup.policy=delete,compact retention.ms=2000] delete [] validate false") {
		t.Fatalf("calls %v", backend.calls)
	}
	// SUBTRACT then SET: a list's element removed; DELETE passed on.
	inc.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		res(2, "other", cfg("cleanup.policy", 3, kmsg.StringPtr("compact")), cfg("retention.ms", 1, nil)),
	}
	inc.ValidateOnly = true
	if resp := roundTrip[*kmsg.IncrementalAlterConfigsResponse](k, inc); resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("SUBTRACT: %s %v", errName(resp.Resources[0].ErrorCode), resp.Resources[0].ErrorMessage)
	}
	if last := backend.calls[len(backend.calls)-1]; last != "alter other set [cleanup.policy=delete] delete [retention.ms] validate true" {
		t.Fatalf("SUBTRACT passed on as %q", last)
	}

	// AlterConfigs replaces: keys not given return to their defaults.
	alt := kmsg.NewPtrAlterConfigsRequest()
	alt.Version = 2
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = 2, "existing"
	r.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("delete")}}
	alt.Resources = []kmsg.AlterConfigsRequestResource{r}
	if resp := roundTrip[*kmsg.AlterConfigsResponse](k, alt); resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %s", errName(resp.Resources[0].ErrorCode))
	}
	if last := backend.calls[len(backend.calls)-1]; last != "alter existing set [cleanup.policy=delete] delete [retention.ms] validate false" {
		t.Fatalf("AlterConfigs passed on as %q", last)
	}
}

func TestKafkaACLs(t *testing.T) {
	backend := newAdminBackend()
	_, k := startServer(t, backend)
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.Version = 3
	creation := func(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType, c.Principal, c.Host = rt, name, pt, principal, host
		c.Operation, c.PermissionType = op, kmsg.ACLPermissionTypeAllow
		return c
	}
	cr.Creations = []kmsg.CreateACLsRequestCreation{
		creation(kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral, "User:alice", "*", kmsg.ACLOperationRead),
		creation(kmsg.ACLResourceTypeTopic, "ord", kmsg.ACLResourcePatternTypePrefixed, "User:bob", "*", kmsg.ACLOperationWrite),
		creation(kmsg.ACLResourceTypeGroup, "g", kmsg.ACLResourcePatternTypeLiteral, "User:alice", "*", kmsg.ACLOperationRead),
		creation(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral, "User:alice", "10.0.0.1", kmsg.ACLOperationRead),
		creation(kmsg.ACLResourceTypeDelegationToken, "x", kmsg.ACLResourcePatternTypeLiteral, "User:alice", "*", kmsg.ACLOperationRead),
		creation(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral, "alice", "*", kmsg.ACLOperationRead),
	}
	crr := roundTrip[*kmsg.CreateACLsResponse](k, cr)
	var codes []int16
	for _, r := range crr.Results {
		codes = append(codes, r.ErrorCode)
	}
	if want := []int16{0, 0, 0, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}; !slices.Equal(codes, want) {
		t.Fatalf("CreateAcls codes %v, want %v", codes, want)
	}
	if len(backend.acls) != 3 || backend.acls[1].PatternType != "Prefixed" || backend.acls[1].Operation != "Write" {
		t.Fatalf("ACLs stored: %v", backend.acls)
	}

	// MATCH on topic "orders": the literal and the prefixed one.
	dr := kmsg.NewPtrDescribeACLsRequest()
	dr.Version = 3
	dr.ResourceType, dr.ResourceName, dr.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("orders"), kmsg.ACLResourcePatternTypeMatch
	dr.Operation, dr.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	drr := roundTrip[*kmsg.DescribeACLsResponse](k, dr)
	if drr.ErrorCode != 0 || len(drr.Resources) != 2 || drr.Resources[1].ResourcePatternType != kmsg.ACLResourcePatternTypePrefixed ||
		drr.Resources[0].ACLs[0].Principal != "User:alice" || drr.Resources[0].ACLs[0].Host != "*" || drr.Resources[0].ACLs[0].Operation != kmsg.ACLOperationRead {
		t.Fatalf("DescribeAcls MATCH orders: %+v", drr)
	}
	// A host filter other than "*" matches nothing.
	dr.Host = kmsg.StringPtr("10.0.0.1")
	if drr := roundTrip[*kmsg.DescribeACLsResponse](k, dr); drr.ErrorCode != 0 || len(drr.Resources) != 0 {
		t.Fatalf("DescribeAcls for one host: %+v", drr)
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	del.Version = 3
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Principal = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.StringPtr("User:alice")
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = []kmsg.DeleteACLsRequestFilter{f}
	delr := roundTrip[*kmsg.DeleteACLsResponse](k, del)
	if len(delr.Results) != 1 || delr.Results[0].ErrorCode != 0 || len(delr.Results[0].MatchingACLs) != 2 || len(backend.acls) != 1 {
		t.Fatalf("DeleteAcls of alice's: %+v; left %v", delr, backend.acls)
	}
}

func TestKafkaSCRAMCredentials(t *testing.T) {
	backend := newAdminBackend()
	_, k := startServer(t, backend)
	al := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(name string, mech int8, salted int) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, 4096, []byte("salt"), make([]byte, salted)
		return u
	}
	al.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{up("bob", 1, 32), up("carol", 2, 64), up("dave", 1, 5), up("eve", 1, 32),
		up("gina", 3, 32), up("hal", 1, 32), up("hal", 2, 64)}
	al.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "alice", Mechanism: 1}, {Name: "nobody", Mechanism: 1}, {Name: "eve", Mechanism: 1}}
	resp := roundTrip[*kmsg.AlterUserSCRAMCredentialsResponse](k, al)
	got := map[string]int16{}
	for _, r := range resp.Results {
		got[r.User] = r.ErrorCode
	}
	// Each mechanism on its own (carol SCRAM-SHA-512 only, hal both in
	// one request); a (user, mechanism) pair named twice refused.
	want := map[string]int16{"alice": 0, "nobody": kerr.ResourceNotFound.Code, "eve": kerr.DuplicateResource.Code, "bob": 0,
		"carol": 0, "dave": kerr.UnacceptableCredential.Code, "gina": kerr.UnsupportedSaslMechanism.Code, "hal": 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("AlterUserScramCredentials: %v, want %v", got, want)
	}
	ds := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	dr := roundTrip[*kmsg.DescribeUserSCRAMCredentialsResponse](k, ds)
	described := map[string]string{}
	for _, r := range dr.Results {
		for _, ci := range r.CredentialInfos {
			described[r.User] += fmt.Sprintf("%d:%d ", ci.Mechanism, ci.Iterations)
		}
	}
	if want := map[string]string{"bob": "1:4096 ", "carol": "2:4096 ", "hal": "1:4096 2:4096 "}; fmt.Sprint(described) != fmt.Sprint(want) {
		t.Fatalf("DescribeUserScramCredentials of all: %v, want %v", described, want)
	}
	ds.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "alice"}, {Name: "bob"}}
	dr = roundTrip[*kmsg.DescribeUserSCRAMCredentialsResponse](k, ds)
	if len(dr.Results) != 2 || dr.Results[0].ErrorCode != kerr.ResourceNotFound.Code || dr.Results[1].ErrorCode != 0 {
		t.Fatalf("DescribeUserScramCredentials of alice (deleted) and bob: %+v", dr.Results)
	}
	// A user whose password was set over gRPC has both mechanisms' keys.
	backend.mu.Lock()
	backend.users["frank"], backend.passwordUsers = 8192, map[string]bool{"frank": true}
	backend.mu.Unlock()
	ds.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "frank"}}
	dr = roundTrip[*kmsg.DescribeUserSCRAMCredentialsResponse](k, ds)
	if len(dr.Results) != 1 || len(dr.Results[0].CredentialInfos) != 2 || dr.Results[0].CredentialInfos[0].Mechanism != 1 ||
		dr.Results[0].CredentialInfos[1].Mechanism != 2 || dr.Results[0].CredentialInfos[1].Iterations != 8192 {
		t.Fatalf("DescribeUserScramCredentials of frank (both mechanisms): %+v", dr.Results)
	}
}

func TestKafkaAdminGroupsProducersLogDirsElections(t *testing.T) {
	backend := newAdminBackend()
	_, k := startServer(t, backend)
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Version, dg.Groups = 2, []string{"idle", "busy", "gone"}
	dgr := roundTrip[*kmsg.DeleteGroupsResponse](k, dg)
	if codes := []int16{dgr.Groups[0].ErrorCode, dgr.Groups[1].ErrorCode, dgr.Groups[2].ErrorCode}; !slices.Equal(codes,
		[]int16{0, kerr.NonEmptyGroup.Code, kerr.GroupIDNotFound.Code}) {
		t.Fatalf("DeleteGroups: %v", codes)
	}

	cg := kmsg.NewPtrConsumerGroupDescribeRequest()
	cg.Version, cg.Groups = 1, []string{"g", "gone"}
	cgr := roundTrip[*kmsg.ConsumerGroupDescribeResponse](k, cg)
	g := cgr.Groups[0]
	if g.ErrorCode != 0 || g.State != "Reconciling" || g.AssignorName != "uniform" || len(g.Members) != 1 {
		t.Fatalf("ConsumerGroupDescribe g: %+v", g)
	}
	m := g.Members[0]
	if m.MemberID != "m1" || m.ClientHost != "10.0.0.1:5" || len(m.Assignment.TopicPartitions) != 1 ||
		!slices.Equal(m.Assignment.TopicPartitions[0].Partitions, []int32{0, 1}) || m.Assignment.TopicPartitions[0].Topic != "t" {
		t.Fatalf("ConsumerGroupDescribe member: %+v", m)
	}
	if cgr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe gone: %s", errName(cgr.Groups[1].ErrorCode))
	}

	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "existing", Partitions: []int32{0, 1}}, {Topic: "nope", Partitions: []int32{0}}}
	dpr := roundTrip[*kmsg.DescribeProducersResponse](k, dp)
	if p := dpr.Topics[0].Partitions; len(p) != 2 || len(p[0].ActiveProducers) != 1 || p[0].ActiveProducers[0].ProducerID != 9 ||
		p[0].ActiveProducers[0].CoordinatorEpoch != -1 || p[1].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("DescribeProducers existing: %+v", p)
	}
	if p := dpr.Topics[1].Partitions; len(p) != 1 || p[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DescribeProducers nope: %+v", p)
	}

	ld := kmsg.NewPtrDescribeLogDirsRequest()
	ld.Version = 4
	ld.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "existing", Partitions: []int32{1}}}
	ldr := roundTrip[*kmsg.DescribeLogDirsResponse](k, ld)
	if len(ldr.Dirs) != 1 || ldr.Dirs[0].Dir != "/data" || len(ldr.Dirs[0].Topics) != 1 || len(ldr.Dirs[0].Topics[0].Partitions) != 1 ||
		ldr.Dirs[0].Topics[0].Partitions[0].Size != 50 || ldr.Dirs[0].Topics[0].Partitions[0].OffsetLag != 2 {
		t.Fatalf("DescribeLogDirs of existing-1: %+v", ldr.Dirs)
	}
	ld.Topics = nil
	if ldr := roundTrip[*kmsg.DescribeLogDirsResponse](k, ld); len(ldr.Dirs[0].Topics) != 2 {
		t.Fatalf("DescribeLogDirs of all: %+v", ldr.Dirs)
	}

	el := kmsg.NewPtrElectLeadersRequest()
	el.Version = 2
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "existing", Partitions: []int32{0, 1, 5}}, {Topic: "nope", Partitions: []int32{0}}}
	elr := roundTrip[*kmsg.ElectLeadersResponse](k, el)
	if p := elr.Topics[0].Partitions; len(p) != 3 || p[0].ErrorCode != kerr.ElectionNotNeeded.Code || p[1].ErrorCode != kerr.PreferredLeaderNotAvailable.Code ||
		p[1].ErrorMessage == nil || p[2].ErrorCode != kerr.UnknownTopicOrPartition.Code ||
		elr.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("ElectLeaders: %+v", elr.Topics)
	}
	el.ElectionType = 1
	if elr := roundTrip[*kmsg.ElectLeadersResponse](k, el); elr.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code ||
		elr.Topics[0].Partitions[0].ErrorMessage == nil {
		t.Fatalf("unclean ElectLeaders: %+v", elr.Topics)
	}
}
