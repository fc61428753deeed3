package request_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
)

// controller is a fake request.Controller: it records the writes it is
// asked for and answers with the topic as written, led by node 2.
type controller struct {
	mu      sync.Mutex
	live    int
	planErr error
	writes  []string
}

func (c *controller) record(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, fmt.Sprintf(format, args...))
}

func (c *controller) written() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.writes, "; ")
}

func topicOf(name string, partitions int32, rf int16, configs map[string]string) metadata.TopicInfo {
	t := metadata.TopicInfo{Name: name, ID: "id-" + name, Configs: configs}
	for p := range partitions {
		pi := metadata.PartitionInfo{Topic: name, Partition: p, Leader: 2, LeaderEpoch: 1}
		for r := range rf {
			pi.Replicas = append(pi.Replicas, int32(r+2))
		}
		pi.ISR = pi.Replicas
		t.Partitions = append(t.Partitions, pi)
	}
	return t
}

func (c *controller) CreateTopic(_ context.Context, spec metadata.TopicSpec) (metadata.TopicInfo, uint64, error) {
	if spec.RequestID != "" {
		c.record("create %s %d %d %v request %s", spec.Name, spec.Partitions, spec.ReplicationFactor, spec.Configs, spec.RequestID)
	} else {
		c.record("create %s %d %d %v", spec.Name, spec.Partitions, spec.ReplicationFactor, spec.Configs)
	}
	t := topicOf(spec.Name, spec.Partitions, spec.ReplicationFactor, spec.Configs)
	t.RequestID = spec.RequestID
	return t, 7, nil
}

func (c *controller) DeleteTopic(_ context.Context, name, _ string) (uint64, error) {
	c.record("delete %s", name)
	return 8, nil
}

func (c *controller) CreatePartitions(_ context.Context, topic string, total int32) (metadata.TopicInfo, uint64, error) {
	c.record("partitions %s %d", topic, total)
	return topicOf(topic, total, 1, nil), 9, nil
}

func (c *controller) AlterConfigs(_ context.Context, topic string, set map[string]string, del []string) error {
	c.record("alter %s %v %v", topic, set, del)
	return nil
}

func (c *controller) UnregisterBroker(_ context.Context, id int32) error {
	c.record("unregister %d", id)
	return nil
}

func (c *controller) LiveBrokers() int                   { return c.live }
func (c *controller) PlanTopic(metadata.TopicSpec) error { return c.planErr }
func (c *controller) PlanPartitions(string, int32) error { return c.planErr }

// ElectLeaders answers partition 0 elected and any other
// ELECTION_NOT_NEEDED (84).
func (c *controller) ElectLeaders(_ context.Context, topics []request.TopicPartitions) ([]request.PartitionResult, error) {
	var out []request.PartitionResult
	for _, t := range topics {
		c.record("elect %s %v", t.Topic, t.Partitions)
		for _, p := range t.Partitions {
			r := request.PartitionResult{Topic: t.Topic, Partition: p}
			if p != 0 {
				r.Err = &request.Error{Code: 84, Message: "not needed"}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

var errBadConfig = errors.New("bad config")

// adminCore is a core with topic administration: 3 partitions and a
// replication factor of 2 by default, keys with a dot known.
func adminCore(t *testing.T, mod func(*request.Config)) (*request.Core, *controller) {
	ctl := &controller{live: 3}
	validKey := func(k string) error {
		if !strings.Contains(k, ".") {
			return fmt.Errorf("%w: unknown topic config %q", request.ErrInvalidConfig, k)
		}
		return nil
	}
	f := newCore(t, func(cfg *request.Config) {
		cfg.Admin = request.AdminConfig{Controller: ctl, NumPartitions: 3, ReplicationFactor: 2, DeleteTopicEnable: true,
			ValidateConfigs: func(m map[string]string) error {
				for k, v := range m {
					if err := validKey(k); err != nil {
						return err
					}
					if v == "bad" {
						return fmt.Errorf("%w: %s=%q: %w", request.ErrInvalidConfig, k, v, errBadConfig)
					}
				}
				return nil
			},
			ValidateConfigKey: validKey,
			TopicConfigs: func(overrides map[string]string) []request.ConfigEntry {
				e := request.ConfigEntry{Name: "retention.ms", Value: "1000", Source: request.SourceDefault}
				if v, ok := overrides["retention.ms"]; ok {
					e.Value, e.Source = v, request.SourceTopic
				}
				return []request.ConfigEntry{e}
			},
		}
		if mod != nil {
			mod(cfg)
		}
	})
	return f.core, ctl
}

func i32(n int32) *int32 { return &n }

// isErr checks that err is an *request.Error wrapping want.
func isErr(t *testing.T, what string, err, want error) {
	t.Helper()
	var e *request.Error
	if !errors.As(err, &e) {
		t.Errorf("%s: %v (%T), want a *request.Error", what, err, err)
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

// A topic is created with the broker's defaults for what the request
// leaves out, described as the controller wrote it; validate-only and
// every refusal write nothing.
func TestCoreCreateTopic(t *testing.T) {
	c, ctl := adminCore(t, nil)
	ctx := ctxT(t)
	out, err := c.CreateTopic(ctx, &request.CreateTopicRequest{Name: "n", Configs: map[string]string{"retention.ms": "5"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Topic.Partitions) != 3 || len(out.Topic.Partitions[0].Replicas) != 2 || out.Topic.ID != "id-n" || out.MetadataIndex != 7 {
		t.Errorf("created %+v at %d, want 3 partitions of 2 replicas at index 7", out.Topic, out.MetadataIndex)
	}
	if got := ctl.written(); got != "create n 3 2 map[retention.ms:5]" {
		t.Errorf("controller asked %q", got)
	}
	out, err = c.CreateTopic(ctx, &request.CreateTopicRequest{Name: "dry", Partitions: i32(5), ReplicationFactor: i32(1), ValidateOnly: true})
	if err != nil || out.Topic.Name != "dry" || out.MetadataIndex != 0 {
		t.Errorf("validate-only: %+v, %v", out, err)
	}
	cases := []struct {
		name string
		req  request.CreateTopicRequest
		live int
		plan error
		want error
	}{
		{"bad name", request.CreateTopicRequest{Name: "a/b"}, 3, nil, request.ErrInvalidTopic},
		{"zero partitions", request.CreateTopicRequest{Name: "z", Partitions: i32(0)}, 3, nil, request.ErrInvalidPartitions},
		{"zero replicas", request.CreateTopicRequest{Name: "z", ReplicationFactor: i32(0)}, 3, nil, request.ErrInvalidReplicationFactor},
		{"more replicas than brokers", request.CreateTopicRequest{Name: "z", ReplicationFactor: i32(4)}, 3, nil, request.ErrInvalidReplicationFactor},
		{"no live broker", request.CreateTopicRequest{Name: "z"}, 0, nil, request.ErrBrokersNotReady},
		{"unknown config", request.CreateTopicRequest{Name: "z", Configs: map[string]string{"retention": "1"}}, 3, nil, request.ErrInvalidConfig},
		{"bad config value", request.CreateTopicRequest{Name: "z", Configs: map[string]string{"retention.ms": "bad"}}, 3, nil, errBadConfig},
		{"exists", request.CreateTopicRequest{Name: "t"}, 3, nil, metadata.ErrTopicExists},
		{"over budget", request.CreateTopicRequest{Name: "z", ValidateOnly: true}, 3, metadata.ErrInvalidPartitions, metadata.ErrInvalidPartitions},
	}
	for _, tc := range cases {
		ctl.live, ctl.planErr = tc.live, tc.plan
		_, err := c.CreateTopic(ctx, &tc.req)
		isErr(t, tc.name, err, tc.want)
	}
	if got := ctl.written(); got != "create n 3 2 map[retention.ms:5]" {
		t.Errorf("controller asked %q after the refusals", got)
	}
}

// madeCluster is the metadata of cluster plus topic "made", created
// with request id madeRequest.
type madeCluster struct{ cluster }

const madeRequest = "3f1c0a52-retry"

func (c madeCluster) Topic(name string) (metadata.TopicInfo, bool) {
	if name == "made" {
		t := topicOf("made", 2, 1, nil)
		t.RequestID = madeRequest
		return t, true
	}
	return c.cluster.Topic(name)
}

// A create with a request id is exactly-once: the topic of that name
// created with that request id is answered as created, from this node's
// image and without the controller, even when the brokers would no
// longer take it; another request id, or none, is TOPIC_ALREADY_EXISTS;
// the request id goes to the controller with a new topic but never
// becomes its id; a malformed one is refused before anything.
func TestCoreCreateTopicRequestID(t *testing.T) {
	c, ctl := adminCore(t, func(cfg *request.Config) {
		cfg.Cluster = madeCluster{}
		cfg.Admin.Describer = describer{}
	})
	ctx := ctxT(t)

	out, err := c.CreateTopic(ctx, &request.CreateTopicRequest{Name: "made", RequestID: madeRequest})
	if err != nil {
		t.Fatalf("retried create: %v", err)
	}
	if out.Topic.ID != "id-made" || out.Topic.Name != "made" || len(out.Topic.Partitions) != 2 || out.MetadataIndex != 5 {
		t.Errorf("retried create answered %+v at %d, want topic made (id-made, 2 partitions) at the image's index 5", out.Topic, out.MetadataIndex)
	}
	// The brokers are gone since the first attempt: the topic is there
	// all the same. Validate-only answers it too, with no index.
	ctl.live = 0
	out, err = c.CreateTopic(ctx, &request.CreateTopicRequest{Name: "made", RequestID: madeRequest, ValidateOnly: true})
	if err != nil || out.Topic.ID != "id-made" || out.MetadataIndex != 0 {
		t.Errorf("validate-only retried create: %+v, %v; want topic made, no index", out, err)
	}
	out, err = c.CreateTopic(ctx, &request.CreateTopicRequest{Name: "made", RequestID: madeRequest})
	if err != nil || out.Topic.ID != "id-made" {
		t.Errorf("retried create with no live broker: %+v, %v", out, err)
	}
	if got := ctl.written(); got != "" {
		t.Errorf("controller asked %q for creates the image answers", got)
	}
	ctl.live = 3

	out, err = c.CreateTopic(ctx, &request.CreateTopicRequest{Name: "fresh", RequestID: madeRequest})
	if err != nil || out.Topic.ID != "id-fresh" {
		t.Errorf("create with a request id: %+v, %v; want the id the controller gave, id-fresh", out, err)
	}
	if got, want := ctl.written(), "create fresh 3 2 map[] request "+madeRequest; got != want {
		t.Errorf("controller asked %q, want %q", got, want)
	}
	ctl.mu.Lock()
	ctl.writes = nil
	ctl.mu.Unlock()

	isErr(t, "another request id", func() error {
		_, err := c.CreateTopic(ctx, &request.CreateTopicRequest{Name: "made", RequestID: "other"})
		return err
	}(), metadata.ErrTopicExists)
	isErr(t, "no request id", func() error {
		_, err := c.CreateTopic(ctx, &request.CreateTopicRequest{Name: "made"})
		return err
	}(), metadata.ErrTopicExists)
	isErr(t, "the topic's id as request id", func() error {
		_, err := c.CreateTopic(ctx, &request.CreateTopicRequest{Name: "made", RequestID: "id-made"})
		return err
	}(), metadata.ErrTopicExists)
	for id, why := range map[string]string{
		strings.Repeat("r", 65): "65 bytes, the limit is 64",
		"two\nlines":            `byte 0x0a at 3`,
		"tab\there":             `byte 0x09 at 3`,
		"caf\u00e9":             `byte 0xc3 at 3`,
		"nul\x00":               `byte 0x00 at 3`,
		"del\x7f":               `byte 0x7f at 3`,
	} {
		_, err := c.CreateTopic(ctx, &request.CreateTopicRequest{Name: "made", RequestID: id})
		isErr(t, "request id "+id, err, replica.ErrInvalidRequest)
		if err != nil && !strings.Contains(err.Error(), why) {
			t.Errorf("request id %q: %v does not say %q", id, err, why)
		}
		_, err = c.CreateTopic(ctx, &request.CreateTopicRequest{Name: "unmade", RequestID: id, ValidateOnly: true})
		isErr(t, "validate-only request id "+id, err, replica.ErrInvalidRequest)
	}
	if got := ctl.written(); got != "" {
		t.Errorf("controller asked %q for refused creates", got)
	}
	// The limits themselves are taken.
	for _, id := range []string{strings.Repeat("~", 64), " ", "a b!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"} {
		if err := request.ValidateCreateRequestID(id); err != nil {
			t.Errorf("request id %q: %v", id, err)
		}
	}
}

func TestCoreDeleteTopicAndPartitions(t *testing.T) {
	c, ctl := adminCore(t, nil)
	ctx := ctxT(t)
	if _, err := c.DeleteTopic(ctx, "missing"); err == nil {
		t.Error("deleting a missing topic succeeded")
	} else {
		isErr(t, "delete missing", err, replica.ErrUnknownTopicOrPartition)
	}
	if index, err := c.DeleteTopic(ctx, "t"); err != nil || index != 8 {
		t.Errorf("delete t: index %d, %v", index, err)
	}
	_, err := c.CreatePartitions(ctx, &request.CreatePartitionsRequest{Topic: "t", TotalCount: 4})
	isErr(t, "no more partitions than it has", err, request.ErrInvalidPartitions)
	_, err = c.CreatePartitions(ctx, &request.CreatePartitionsRequest{Topic: "missing", TotalCount: 6})
	isErr(t, "partitions of a missing topic", err, replica.ErrUnknownTopicOrPartition)
	out, err := c.CreatePartitions(ctx, &request.CreatePartitionsRequest{Topic: "t", TotalCount: 6, ValidateOnly: true})
	if err != nil || len(out.Topic.Partitions) != 4 {
		t.Errorf("validate-only: %+v, %v", out, err)
	}
	out, err = c.CreatePartitions(ctx, &request.CreatePartitionsRequest{Topic: "t", TotalCount: 6})
	if err != nil || len(out.Topic.Partitions) != 6 || out.MetadataIndex != 9 {
		t.Errorf("grown: %+v, %v", out, err)
	}
	if got := ctl.written(); got != "delete t; partitions t 6" {
		t.Errorf("controller asked %q", got)
	}

	off, _ := adminCore(t, func(cfg *request.Config) { cfg.Admin.DeleteTopicEnable = false })
	_, err = off.DeleteTopic(ctx, "t")
	isErr(t, "delete.topic.enable=false", err, request.ErrPolicyViolation)

	none := newCore(t, nil).core
	_, err = none.CreateTopic(ctx, &request.CreateTopicRequest{Name: "n"})
	isErr(t, "no controller", err, request.ErrPolicyViolation)
}

func TestCoreConfigs(t *testing.T) {
	c, ctl := adminCore(t, nil)
	ctx := ctxT(t)
	entries, err := c.DescribeConfigs(ctx, "t")
	if err != nil || len(entries) != 1 || entries[0].Source != request.SourceDefault {
		t.Errorf("describe t: %+v, %v", entries, err)
	}
	_, err = c.DescribeConfigs(ctx, "missing")
	isErr(t, "describe missing", err, replica.ErrUnknownTopicOrPartition)
	refused := []struct {
		name string
		req  request.AlterConfigsRequest
		want error
	}{
		{"missing topic", request.AlterConfigsRequest{Topic: "missing", Set: map[string]string{"retention.ms": "1"}}, replica.ErrUnknownTopicOrPartition},
		{"nothing asked", request.AlterConfigsRequest{Topic: "t"}, replica.ErrInvalidRequest},
		{"unknown key set", request.AlterConfigsRequest{Topic: "t", Set: map[string]string{"retention": "1"}}, request.ErrInvalidConfig},
		{"unknown key deleted", request.AlterConfigsRequest{Topic: "t", Delete: []string{"retention"}}, request.ErrInvalidConfig},
		{"set and deleted", request.AlterConfigsRequest{Topic: "t", Set: map[string]string{"retention.ms": "1"}, Delete: []string{"retention.ms"}}, request.ErrInvalidConfig},
	}
	for _, tc := range refused {
		isErr(t, tc.name, c.AlterConfigs(ctx, &tc.req), tc.want)
	}
	if err := c.AlterConfigs(ctx, &request.AlterConfigsRequest{Topic: "t", Set: map[string]string{"retention.ms": "1"}, ValidateOnly: true}); err != nil {
		t.Errorf("validate-only: %v", err)
	}
	if err := c.AlterConfigs(ctx, &request.AlterConfigsRequest{Topic: "t", Set: map[string]string{"retention.ms": "1"}, Delete: []string{"segment.ms"}}); err != nil {
		t.Errorf("alter: %v", err)
	}
	if got := ctl.written(); got != "alter t map[retention.ms:1] [segment.ms]" {
		t.Errorf("controller asked %q", got)
	}
}

// Each operation needs its ACL, as Kafka's does; creating a topic may be
// allowed on the cluster instead. A refused request writes nothing.
func TestCoreAdminAuthorization(t *testing.T) {
	ctx := ctxT(t)
	alice := request.WithPrincipal(ctx, "User:alice")
	c, ctl := adminCore(t, func(cfg *request.Config) { cfg.Authorizer = acls{} })
	isErr(t, "create", func() error { _, err := c.CreateTopic(alice, &request.CreateTopicRequest{Name: "n"}); return err }(), request.ErrTopicAuthorizationFailed)
	isErr(t, "delete", func() error { _, err := c.DeleteTopic(alice, "t"); return err }(), request.ErrTopicAuthorizationFailed)
	isErr(t, "partitions", func() error {
		_, err := c.CreatePartitions(alice, &request.CreatePartitionsRequest{Topic: "t", TotalCount: 6})
		return err
	}(), request.ErrTopicAuthorizationFailed)
	isErr(t, "describe configs", func() error { _, err := c.DescribeConfigs(alice, "t"); return err }(), request.ErrTopicAuthorizationFailed)
	isErr(t, "alter configs", c.AlterConfigs(alice, &request.AlterConfigsRequest{Topic: "t", Set: map[string]string{"retention.ms": "1"}}),
		request.ErrTopicAuthorizationFailed)
	if got := ctl.written(); got != "" {
		t.Errorf("refused requests wrote %q", got)
	}

	c, ctl = adminCore(t, func(cfg *request.Config) {
		cfg.Authorizer = acls{auth.OpCreate: {auth.ClusterName: true}, auth.OpDelete: {"t": true}, auth.OpAlter: {"t": true},
			auth.OpDescribeConfigs: {"t": true}, auth.OpAlterConfigs: {"t": true}}
	})
	if _, err := c.CreateTopic(alice, &request.CreateTopicRequest{Name: "n"}); err != nil {
		t.Errorf("create with Create on the cluster: %v", err)
	}
	if _, err := c.CreatePartitions(alice, &request.CreatePartitionsRequest{Topic: "t", TotalCount: 6}); err != nil {
		t.Errorf("partitions with Alter: %v", err)
	}
	if _, err := c.DescribeConfigs(alice, "t"); err != nil {
		t.Errorf("describe configs with DescribeConfigs: %v", err)
	}
	if err := c.AlterConfigs(alice, &request.AlterConfigsRequest{Topic: "t", Set: map[string]string{"retention.ms": "1"}}); err != nil {
		t.Errorf("alter configs with AlterConfigs: %v", err)
	}
	if _, err := c.DeleteTopic(alice, "t"); err != nil {
		t.Errorf("delete with Delete: %v", err)
	}
	if _, err := c.DeleteTopic(ctx, "t"); !errors.Is(err, request.ErrTopicAuthorizationFailed) {
		t.Errorf("an anonymous delete: %v", err)
	}
	if n := strings.Count(ctl.written(), ";"); n != 3 {
		t.Errorf("controller asked %q, want 4 writes", ctl.written())
	}
}
