package broker_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
)

// franz-go's admin client (kadm) manages topics, partitions, configs,
// groups, ACLs and SCRAM users through a broker's Kafka listener, and
// every answer says what the cluster did.
func TestBrokerKafkaAdmin(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
		c.NumPartitions = 3
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, addr)
	adm := kadm.NewClient(cl)

	// Topics: created with explicit counts and configs, or the broker's
	// defaults (-1); an existing one refused; a dry run creates nothing.
	created, err := adm.CreateTopics(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "ka", "kb")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range created.Sorted() {
		if r.Err != nil || r.NumPartitions != 2 || r.ReplicationFactor != 1 || r.ID == (kadm.TopicID{}) {
			t.Fatalf("create %s: %v (%s), %d partitions, rf %d, id %v", r.Topic, r.Err, r.ErrMessage, r.NumPartitions, r.ReplicationFactor, r.ID)
		}
	}
	if r, err := adm.CreateTopic(ctx, -1, -1, nil, "kdef"); err != nil || r.Err != nil || r.NumPartitions != 3 {
		t.Fatalf("create with the defaults: %v %v, %d partitions (want num.partitions 3)", err, r.Err, r.NumPartitions)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, nil, "ka"); !errors.Is(r.Err, kerr.TopicAlreadyExists) || r.ErrMessage == "" {
		t.Fatalf("create an existing topic: %v (%q)", r.Err, r.ErrMessage)
	}
	if r, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.mss": kadm.StringPtr("1")}, "kbad"); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("create with an unknown config: %v (%q)", r.Err, r.ErrMessage)
	}
	if rs, err := adm.ValidateCreateTopics(ctx, 1, 1, nil, "kdry"); err != nil || rs["kdry"].Err != nil {
		t.Fatalf("validate create: %v %v", err, rs["kdry"].Err)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !topics.Has("ka") || !topics.Has("kdef") || topics.Has("kdry") || topics.Has("kbad") {
		t.Fatalf("topics after creating: %v", topics.Names())
	}

	// Partitions: added, a shrink refused, a dry run changes nothing.
	if rs, err := adm.CreatePartitions(ctx, 2, "ka"); err != nil || rs["ka"].Err != nil {
		t.Fatalf("add partitions: %v %v", err, rs["ka"].Err)
	}
	if rs, _ := adm.UpdatePartitions(ctx, 1, "ka"); !errors.Is(rs["ka"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrink: %v", rs["ka"].Err)
	}
	if rs, err := adm.ValidateCreatePartitions(ctx, 5, "kb"); err != nil || rs["kb"].Err != nil {
		t.Fatalf("validate add partitions: %v %v", err, rs["kb"].Err)
	}
	topics, _ = adm.ListTopics(ctx, "ka", "kb")
	if n, m := len(topics["ka"].Partitions), len(topics["kb"].Partitions); n != 4 || m != 2 {
		t.Fatalf("partitions after growing ka and a dry run on kb: %d, %d; want 4, 2", n, m)
	}

	// Configs: described with their sources; set, deleted and a bad value
	// refused per topic; a broker's are static.
	configOf := func(topic, key string) kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe configs of %s: %v %v", topic, err, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == key {
				return c
			}
		}
		t.Fatalf("%s has no %s: %+v", topic, key, rc.Configs)
		return kadm.Config{}
	}
	if c := configOf("ka", "retention.ms"); c.MaybeValue() != "60000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("ka retention.ms %q from %v", c.MaybeValue(), c.Source)
	}
	if c := configOf("ka", "cleanup.policy"); c.MaybeValue() != "delete" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("ka cleanup.policy %q from %v", c.MaybeValue(), c.Source)
	}
	alter := []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("120000")}, {Name: "max.message.bytes", Value: kadm.StringPtr("2000000")}}
	if rs, err := adm.AlterTopicConfigs(ctx, alter, "ka"); err != nil || rs[0].Err != nil {
		t.Fatalf("alter configs: %v %+v", err, rs)
	}
	if c := configOf("ka", "max.message.bytes"); c.MaybeValue() != "2000000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("ka max.message.bytes %q from %v after setting it", c.MaybeValue(), c.Source)
	}
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "ka"); err != nil || rs[0].Err != nil {
		t.Fatalf("delete a config: %v %+v", err, rs)
	}
	if c := configOf("ka", "retention.ms"); c.Source == kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("ka retention.ms still the topic's (%q) after deleting it", c.MaybeValue())
	}
	if rs, _ := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("soon")}}, "ka"); len(rs) != 1 ||
		!errors.Is(rs[0].Err, kerr.InvalidConfig) || rs[0].ErrMessage == "" {
		t.Fatalf("a bad value: %+v", rs)
	}
	if rs, _ := adm.AlterTopicConfigs(ctx, alter, "knone"); len(rs) != 1 || !errors.Is(rs[0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("alter configs of an unknown topic: %+v", rs)
	}
	id := b.Config().NodeID
	brs, err := adm.DescribeBrokerConfigs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	br, err := brs.On(strconv.Itoa(int(id)), nil)
	if err != nil || br.Err != nil || !slices.ContainsFunc(br.Configs, func(c kadm.Config) bool {
		return c.Key == "num.partitions" && c.MaybeValue() == "3" && c.Source == kmsg.ConfigSourceStaticBrokerConfig
	}) {
		t.Fatalf("broker configs: %v %v %+v", err, br.Err, br.Configs)
	}
	if rs, _ := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "num.partitions", Value: kadm.StringPtr("5")}}, id); len(rs) != 1 || rs[0].Err == nil {
		t.Fatalf("altering a static broker config: %+v", rs)
	}

	// Groups: a group with committed offsets is described (KIP-848's
	// ConsumerGroupDescribe) and deleted; an unknown one is not found.
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "ka", Partition: 0, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "kg", offsets); err != nil {
		t.Fatalf("commit: %v", err)
	}
	dgs, err := adm.DescribeConsumerGroups(ctx, "kg")
	if err != nil || dgs["kg"].Err != nil || dgs["kg"].State != "Empty" {
		t.Fatalf("describe consumer group: %v %+v", err, dgs["kg"])
	}
	if rs, err := adm.DeleteGroups(ctx, "kg", "knogroup"); err != nil || rs["kg"].Err != nil || !errors.Is(rs["knogroup"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("delete groups: %v %+v", err, rs)
	}
	if gs, err := adm.ListGroups(ctx); err != nil || slices.Contains(gs.Groups(), "kg") {
		t.Fatalf("groups after deleting kg: %v %v", err, gs.Groups())
	}

	// ACLs: created, described by a filter, deleted (they need the
	// metadata.version a new node raises the cluster to soon after it
	// starts).
	brokertest.WaitMetadataVersion(t, b, 3)
	acl := kadm.NewACLs().Allow("User:alice").Topics("ka").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if rs, err := adm.CreateACLs(ctx, acl); err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("create ACLs: %v %+v", err, rs)
	}
	filter := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("ka").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	ds, err := adm.DescribeACLs(ctx, filter)
	if err != nil || len(ds) != 1 || ds[0].Err != nil || len(ds[0].Described) != 1 || ds[0].Described[0].Operation != kadm.OpRead {
		t.Fatalf("describe ACLs: %v %+v", err, ds)
	}
	dels, err := adm.DeleteACLs(ctx, filter)
	if err != nil || len(dels) != 1 || dels[0].Err != nil || len(dels[0].Deleted) != 1 {
		t.Fatalf("delete ACLs: %v %+v", err, dels)
	}
	if ds, err := adm.DescribeACLs(ctx, filter); err != nil || len(ds[0].Described) != 0 {
		t.Fatalf("ACLs left after deleting: %v %+v", err, ds)
	}

	// SCRAM: a user upserted from a client-salted password, described,
	// deleted.
	up := kadm.UpsertSCRAM{User: "kbob", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "s3cret"}
	if rs, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{up}); err != nil || rs["kbob"].Err != nil {
		t.Fatalf("upsert SCRAM user: %v %+v", err, rs)
	}
	if us, err := adm.DescribeUserSCRAMs(ctx, "kbob"); err != nil || us["kbob"].Err != nil || len(us["kbob"].CredInfos) != 1 ||
		us["kbob"].CredInfos[0].Iterations != 8192 {
		t.Fatalf("describe SCRAM user: %v %+v", err, us)
	}
	if rs, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "kbob", Mechanism: kadm.ScramSha256}}, nil); err != nil || rs["kbob"].Err != nil {
		t.Fatalf("delete SCRAM user: %v %+v", err, rs)
	}
	if us, _ := adm.DescribeUserSCRAMs(ctx, "kbob"); !errors.Is(us["kbob"].Err, kerr.ResourceNotFound) {
		t.Fatalf("a deleted SCRAM user: %+v", us)
	}

	// The cluster, the log directories, producers and elections.
	dc := kmsg.NewPtrDescribeClusterRequest()
	dcr, err := dc.RequestWith(ctx, cl)
	if err != nil || dcr.ErrorCode != 0 || len(dcr.Brokers) != 1 || dcr.Brokers[0].NodeID != id || dcr.ControllerID != id {
		t.Fatalf("describe cluster: %v %+v", err, dcr)
	}
	dirs, err := adm.DescribeBrokerLogDirs(ctx, id, kadm.TopicsSet{"ka": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	dirs.Each(func(d kadm.DescribedLogDir) {
		if _, ok := d.Topics["ka"][0]; ok && d.Err == nil && d.Dir == b.Config().DataDir {
			found = true
		}
	})
	if !found {
		t.Fatalf("log dirs: %+v", dirs)
	}
	if ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"ka": {0: {}}}); err != nil || ps["ka"].Partitions[0].Err != nil {
		t.Fatalf("describe producers: %v %+v", err, ps)
	}
	if el, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"ka": {0: {}}}); err != nil ||
		!errors.Is(el["ka"][0].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("elect the preferred leader of a partition it leads: %v %+v", err, el)
	}

	// Topics deleted; deleting one again is refused.
	if rs, err := adm.DeleteTopics(ctx, "ka", "kb", "kdef"); err != nil || rs.Error() != nil {
		t.Fatalf("delete topics: %v %v", err, rs.Error())
	}
	if r, _ := adm.DeleteTopic(ctx, "ka"); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete a deleted topic: %v", r.Err)
	}
	if topics, err := adm.ListTopics(ctx); err != nil || len(topics) != 0 {
		t.Fatalf("topics left: %v %v", err, topics.Names())
	}
}
