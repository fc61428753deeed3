package request_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
)

// describer is the quorum as DescribeCluster sees it: brokers 3, 1 and
// 2 (listed out of order), 1 the controller.
type describer struct{}

func (describer) ClusterID() string             { return "qc" }
func (describer) ControllerID() int32           { return 1 }
func (describer) IsController(id int32) bool    { return id == 1 }
func (describer) HostedReplicas() map[int32]int { return map[int32]int{1: 4, 2: 2} }
func (describer) MetadataIndex() uint64         { return 5 }

// WaitForIndex: the image never gets past 5.
func (describer) WaitForIndex(ctx context.Context, want uint64) error {
	if want <= 5 {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (describer) Brokers() []metadata.BrokerInfo {
	return []metadata.BrokerInfo{{ID: 3, Fenced: true}, {ID: 1, Rack: "r1"}, {ID: 2}}
}

func TestCoreDescribeCluster(t *testing.T) {
	ctx := ctxT(t)
	c, _ := adminCore(t, func(cfg *request.Config) { cfg.Admin.Describer = describer{} })
	d, err := c.DescribeCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.ClusterID != "qc" || d.ControllerID != 1 || len(d.Brokers) != 3 {
		t.Fatalf("described %+v", d)
	}
	for i, want := range []request.BrokerDescription{
		{Info: metadata.BrokerInfo{ID: 1, Rack: "r1"}, Controller: true, Partitions: 4},
		{Info: metadata.BrokerInfo{ID: 2}, Partitions: 2},
		{Info: metadata.BrokerInfo{ID: 3, Fenced: true}},
	} {
		got := d.Brokers[i]
		if got.Info.ID != want.Info.ID || got.Info.Rack != want.Info.Rack || got.Info.Fenced != want.Info.Fenced ||
			got.Controller != want.Controller || got.Partitions != want.Partitions {
			t.Errorf("broker %d: %+v, want %+v", i, got, want)
		}
	}
	z, _ := adminCore(t, func(cfg *request.Config) { cfg.Admin.Describer = describer{}; cfg.Authorizer = acls{} })
	_, err = z.DescribeCluster(request.WithPrincipal(ctx, "User:alice"))
	isErr(t, "describe cluster without Describe on it", err, request.ErrClusterAuthorizationFailed)
	z, _ = adminCore(t, func(cfg *request.Config) {
		cfg.Admin.Describer = describer{}
		cfg.Authorizer = acls{auth.OpDescribe: {auth.ClusterName: true}}
	})
	if _, err := z.DescribeCluster(request.WithPrincipal(ctx, "User:alice")); err != nil {
		t.Errorf("with Describe on the cluster: %v", err)
	}
}

// ListTopics leaves out what the caller may not describe.
func TestCoreListTopics(t *testing.T) {
	ctx := ctxT(t)
	c, _ := adminCore(t, nil)
	ls := c.ListTopics(ctx)
	if len(ls) != 1 || ls[0].Name != "t" || ls[0].Partitions != 4 || ls[0].ReplicationFactor != 1 {
		t.Errorf("listed %+v", ls)
	}
	z, _ := adminCore(t, func(cfg *request.Config) { cfg.Authorizer = acls{} })
	if ls := z.ListTopics(request.WithPrincipal(ctx, "User:alice")); len(ls) != 0 {
		t.Errorf("listed %+v to a principal that may describe nothing", ls)
	}
}

func TestCoreUnregisterBroker(t *testing.T) {
	ctx := ctxT(t)
	c, ctl := adminCore(t, nil)
	isErr(t, "a negative id", c.UnregisterBroker(ctx, -1), replica.ErrInvalidRequest)
	isErr(t, "itself", c.UnregisterBroker(ctx, self), metadata.ErrBrokerNotRemovable)
	isErr(t, "unknown", c.UnregisterBroker(ctx, 9), metadata.ErrUnknownBroker)
	if err := c.UnregisterBroker(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if got := ctl.written(); got != "unregister 3" {
		t.Errorf("controller asked %q", got)
	}
	z, _ := adminCore(t, func(cfg *request.Config) { cfg.Authorizer = acls{} })
	isErr(t, "without Alter on the cluster", z.UnregisterBroker(request.WithPrincipal(ctx, "User:alice"), 3), request.ErrClusterAuthorizationFailed)
}

// DescribeProducers answers the partitions led here from their logs, and
// NOT_LEADER_OR_FOLLOWER with the leader for the others.
func TestCoreDescribeProducers(t *testing.T) {
	ctx := ctxT(t)
	c, _ := adminCore(t, nil)
	ps, err := c.DescribeProducers(ctx, "t", []int32{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Err != nil || ps[1].Err == nil || ps[1].Err.LeaderID != 2 {
		t.Fatalf("described %+v", ps)
	}
	if !errors.Is(ps[1].Err, replica.ErrNotLeader) {
		t.Errorf("partition 1: %v, want not leader", ps[1].Err)
	}
	if ps, err := c.DescribeProducers(ctx, "t", nil); err != nil || len(ps) != 4 {
		t.Errorf("every partition: %d, %v", len(ps), err)
	}
	_, err = c.DescribeProducers(ctx, "t", []int32{9})
	isErr(t, "partition 9", err, replica.ErrInvalidRequest)
	_, err = c.DescribeProducers(ctx, "missing", nil)
	isErr(t, "missing topic", err, replica.ErrUnknownTopicOrPartition)
	z, _ := adminCore(t, func(cfg *request.Config) { cfg.Authorizer = acls{auth.OpDescribe: {"t": true}} })
	_, err = z.DescribeProducers(request.WithPrincipal(ctx, "User:alice"), "t", nil)
	isErr(t, "without Read", err, request.ErrTopicAuthorizationFailed)
}

// A broker's configuration is this node's own, asked by its id; it
// needs DescribeConfigs on the cluster.
func TestCoreDescribeBrokerConfigs(t *testing.T) {
	ctx := ctxT(t)
	keys := []request.ConfigEntry{{Name: "num.partitions", Value: "3", Source: request.SourceBroker, ReadOnly: true}}
	c, _ := adminCore(t, func(cfg *request.Config) { cfg.Admin.BrokerConfigs = func() []request.ConfigEntry { return keys } })
	if es, err := c.DescribeBrokerConfigs(ctx, "1"); err != nil || len(es) != 1 || es[0].Name != "num.partitions" {
		t.Errorf("broker 1: %+v, %v", es, err)
	}
	if es, err := c.DescribeBrokerConfigs(ctx, ""); err != nil || len(es) != 0 {
		t.Errorf("cluster defaults: %+v, %v", es, err)
	}
	_, err := c.DescribeBrokerConfigs(ctx, "2")
	isErr(t, "another broker", err, replica.ErrInvalidRequest)
	_, err = c.DescribeBrokerConfigs(ctx, "one")
	isErr(t, "not an id", err, replica.ErrInvalidRequest)
	z, _ := adminCore(t, func(cfg *request.Config) { cfg.Authorizer = acls{auth.OpDescribeConfigs: {"t": true}} })
	_, err = z.DescribeBrokerConfigs(request.WithPrincipal(ctx, "User:alice"), "1")
	isErr(t, "without DescribeConfigs on the cluster", err, request.ErrClusterAuthorizationFailed)
}

// Metadata answers the topics named that the caller may describe, each
// other with its refusal (or the whole request refused, AllOrNothing);
// a listing leaves out what the caller may not describe; a topic named
// that does not exist is created when the node auto-creates topics and
// the caller may create it.
func TestCoreMetadata(t *testing.T) {
	ctx := ctxT(t)
	alice := request.WithPrincipal(ctx, "User:alice")
	creator := &autoCreator{}
	c, _ := adminCore(t, func(cfg *request.Config) {
		cfg.Admin.Describer = describer{}
		cfg.Creator = creator
		cfg.Authorizer = acls{auth.OpDescribe: {"t": true, "new": true, "denied-create": true}, auth.OpCreate: {"new": true}}
	})
	md, err := c.Metadata(alice, &request.MetadataRequest{})
	if err != nil || len(md.Topics) != 1 || md.Topics[0].Info.Name != "t" || md.Index != 5 || len(md.Brokers) != 3 || md.Brokers[0].ID != 1 {
		t.Fatalf("listing: %+v, %v", md, err)
	}
	md, err = c.Metadata(alice, &request.MetadataRequest{Topics: []string{"secret", "t", "new", "denied-create"}, AllowAutoTopicCreation: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]error{}
	for _, tm := range md.Topics {
		if tm.Err != nil {
			got[tm.Info.Name] = tm.Err
		} else {
			got[tm.Info.Name] = nil
		}
	}
	if len(got) != 4 || got["t"] != nil || got["new"] != nil {
		t.Errorf("answered %v", got)
	}
	isErr(t, "a topic alice may not describe", got["secret"], request.ErrTopicAuthorizationFailed)
	isErr(t, "a topic alice may not create", got["denied-create"], request.ErrTopicAuthorizationFailed)
	if fmt.Sprint(creator.created) != "[new]" {
		t.Errorf("created %v, want [new]", creator.created)
	}
	_, err = c.Metadata(alice, &request.MetadataRequest{Topics: []string{"t", "secret", "other"}, AllowAutoTopicCreation: true, AllOrNothing: true})
	isErr(t, "all or nothing", err, request.ErrTopicAuthorizationFailed)
	if fmt.Sprint(creator.created) != "[new]" {
		t.Errorf("a refused request created %v", creator.created)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c.Metadata(short, &request.MetadataRequest{MinIndex: 6})
	isErr(t, "an index the image does not reach", err, replica.ErrRequestTimedOut)

	off, _ := adminCore(t, func(cfg *request.Config) { cfg.Admin.Describer = describer{} })
	md, err = off.Metadata(ctx, &request.MetadataRequest{Topics: []string{"missing"}, AllowAutoTopicCreation: true})
	if err != nil || len(md.Topics) != 1 {
		t.Fatalf("%+v, %v", md, err)
	}
	isErr(t, "auto-creation off", md.Topics[0].Err, replica.ErrUnknownTopicOrPartition)
}

// autoCreator records the topics it creates, one partition led by 2.
type autoCreator struct{ created []string }

func (a *autoCreator) AutoCreateTopic(_ context.Context, topic string) (metadata.TopicInfo, error) {
	a.created = append(a.created, topic)
	return topicOf(topic, 1, 1, nil), nil
}
