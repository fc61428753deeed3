package broker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/metadata"
)

// groupResource is Kafka's GROUP config resource type.
const groupResource = kmsg.ConfigResourceType(32)

func alterGroup(t *testing.T, ctx context.Context, cl *kgo.Client, group string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = groupResource, group, ops
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	rr := resp.Resources[0]
	msg := ""
	if rr.ErrorMessage != nil {
		msg = *rr.ErrorMessage
	}
	return rr.ErrorCode, msg
}

func setOp(k, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
	return c
}

func deleteOp(k string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = k, kmsg.IncrementalAlterConfigOpDelete
	return c
}

// describeGroup answers each key of the group's settings: value and
// source.
func describeGroup(t *testing.T, ctx context.Context, cl *kgo.Client, group string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = groupResource, group
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Resources[0].ErrorCode; c != 0 {
		t.Fatalf("describe group %s: %v", group, kerr.ErrorForCode(c))
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// The GROUP config resource over the Kafka listener: a share group's
// settings set with IncrementalAlterConfigs (as franz-go's share consumer
// sets share.auto.offset.reset) are described with their source, bad
// values and unknown keys are INVALID_CONFIG naming the key, DELETE
// returns a key to the node's value, and DeleteGroups removes an empty
// share group's settings and refuses one with a member (NON_EMPTY_GROUP).
func TestBrokerKafkaShareGroupConfigs(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, addr)

	// The node raises its metadata.version to 16 once started.
	poll.Until(t, "the group settings saved", func() error {
		code, msg := alterGroup(t, ctx, cl, "sg",
			setOp("share.key.ordering", "true"),
			setOp("share.delivery.count.limit", "3"),
			setOp("share.record.lock.duration.ms", "15000"),
			setOp("errors.deadletterqueue.topic.name", "dlq.sq"),
			setOp("share.auto.offset.reset", "by_duration:PT1H"))
		if code == kerr.UnsupportedVersion.Code {
			return fmt.Errorf("%s", msg)
		}
		if code != 0 {
			t.Fatalf("alter: %v: %s", kerr.ErrorForCode(code), msg)
		}
		return nil
	})
	got := describeGroup(t, ctx, cl, "sg")
	want := map[string]string{"share.key.ordering": "true", "share.delivery.count.limit": "3",
		"share.record.lock.duration.ms": "15000", "errors.deadletterqueue.topic.name": "dlq.sq",
		"share.auto.offset.reset": "by_duration:PT3600S"}
	for k, v := range want {
		c, ok := got[k]
		if !ok || c.Value == nil || *c.Value != v || c.Source != kmsg.ConfigSourceGroupConfig {
			t.Errorf("%s: %+v, want %q from the group", k, c, v)
		}
	}

	for _, bad := range []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		setOp("share.delivery.count.limit", "0"),
		setOp("share.key.ordering", "sometimes"),
		setOp("share.auto.offset.reset", "yesterday"),
		setOp("share.record.lock.duration.ms", "-5"),
		setOp("no.such.key", "1"),
		deleteOp("no.such.key"),
	} {
		code, msg := alterGroup(t, ctx, cl, "sg", bad)
		if code != kerr.InvalidConfig.Code || msg == "" {
			t.Errorf("%s=%v: %v %q, want INVALID_CONFIG with a message", bad.Name, bad.Value, kerr.ErrorForCode(code), msg)
		}
	}
	// Nothing of the refused changes was applied.
	if c := describeGroup(t, ctx, cl, "sg")["share.delivery.count.limit"]; *c.Value != "3" {
		t.Fatalf("delivery limit after the refusals: %q", *c.Value)
	}

	if code, msg := alterGroup(t, ctx, cl, "sg", deleteOp("share.delivery.count.limit")); code != 0 {
		t.Fatalf("delete: %v: %s", kerr.ErrorForCode(code), msg)
	}
	c := describeGroup(t, ctx, cl, "sg")["share.delivery.count.limit"]
	if *c.Value != "5" || c.Source == kmsg.ConfigSourceGroupConfig {
		t.Fatalf("delivery limit after DELETE: %q from %v, want the node's 5", *c.Value, c.Source)
	}

	// A member makes the group non-empty: DeleteGroups refuses it.
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "sq"); err != nil {
		t.Fatal(err)
	}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sg", "m1", []string{"sq"}
	hbResp, err := hb.RequestWith(ctx, cl)
	if err != nil || hbResp.ErrorCode != 0 {
		t.Fatalf("join: %v %v", err, hbResp)
	}
	if _, err := adm.DeleteGroup(ctx, "sg"); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("delete of a share group with a member: %v, want NON_EMPTY_GROUP", err)
	}
	leave := kmsg.NewPtrShareGroupHeartbeatRequest()
	leave.GroupID, leave.MemberID, leave.MemberEpoch = "sg", *hbResp.MemberID, -1
	if r, err := leave.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("leave: %v %v", err, r)
	}
	if _, err := adm.DeleteGroup(ctx, "sg"); err != nil {
		t.Fatalf("delete of the empty share group: %v", err)
	}
	if _, err := adm.DeleteGroup(ctx, "sg"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("delete of the deleted share group: %v, want GROUP_ID_NOT_FOUND", err)
	}
	for k, c := range describeGroup(t, ctx, cl, "sg") {
		if c.Source == kmsg.ConfigSourceGroupConfig {
			t.Errorf("%s still set on the deleted group: %q", k, *c.Value)
		}
	}
}

// DeleteShareGroupOffsets (92) over the Kafka listener, through kadm:
// refused while the share group has a member, then the group's saved
// state on the topic goes, and a new member reads the topic again from
// the group's share.auto.offset.reset, every record a first delivery; an
// unknown topic is refused in its result.
func TestBrokerKafkaDeleteShareGroupOffsets(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, addr)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "dso"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the group reads from the start", func() error {
		if code, msg := alterGroup(t, ctx, cl, "dsg", setOp("share.auto.offset.reset", "earliest")); code != 0 {
			return fmt.Errorf("%v: %s", kerr.ErrorForCode(code), msg)
		}
		return nil
	})
	prod := kafkaClient(t, addr, kgo.DefaultProduceTopic("dso"))
	for i := range 5 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// readAll has a member accept every record, then leave; it answers
	// the delivery count of each offset.
	readAll := func() map[int64]int32 {
		t.Helper()
		m, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("dsg"), kgo.ConsumeTopics("dso"))
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]int32{}
		for len(got) < 5 {
			fs := m.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("read %v: %v", got, err)
			}
			for _, r := range fs.Records() {
				got[r.Offset] = r.DeliveryCount()
			}
			m.MarkAcks(kgo.AckAccept, fs.Records()...)
			if err := m.FlushAcks(ctx); err != nil {
				t.Fatal(err)
			}
		}
		m.Close()
		return got
	}
	readAll()

	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "dsg", "m1", []string{"dso"}
	if r, err := hb.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("join: %v %v", err, r)
	}
	if _, err := adm.DeleteShareGroupOffsets(ctx, "dsg", "dso"); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("with a member: %v, want NON_EMPTY_GROUP", err)
	}
	leave := kmsg.NewPtrShareGroupHeartbeatRequest()
	leave.GroupID, leave.MemberID, leave.MemberEpoch = "dsg", "m1", -1
	if r, err := leave.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("leave: %v %v", err, r)
	}
	res, err := adm.DeleteShareGroupOffsets(ctx, "dsg", "dso", "nope")
	if err != nil || res["dso"] != nil || !errors.Is(res["nope"], kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete: %v %v", res, err)
	}
	got := readAll()
	for o := int64(0); o < 5; o++ {
		if got[o] != 1 {
			t.Fatalf("after the delete, offset %d delivered with count %d (all: %v), want every record again, first delivery", o, got[o], got)
		}
	}
	if _, err := adm.DeleteShareGroupOffsets(ctx, "nogroup", "dso"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("an unknown group: %v, want GROUP_ID_NOT_FOUND", err)
	}
}

// DescribeShareGroupOffsets (90) and AlterShareGroupOffsets (91) over
// the Kafka listener, through kadm: after a member accepts a
// partition's records, the group's start offset is the partition's end
// with no lag; setting it back is refused while the group has a member,
// then takes (an unknown topic refused in its result), describe shows
// the new start and its lag, and a new member gets exactly the records
// from it on, each a first delivery; the other partition, empty, keeps
// its start.
func TestBrokerKafkaShareGroupOffsets(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	brokertest.WaitMetadataVersion(t, b, metadata.LatestMetadataVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, addr)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "sgo"); err != nil {
		t.Fatal(err)
	}
	if code, msg := alterGroup(t, ctx, cl, "sgog", setOp("share.auto.offset.reset", "earliest")); code != 0 {
		t.Fatalf("%v: %s", kerr.ErrorForCode(code), msg)
	}
	prod := kafkaClient(t, addr, kgo.DefaultProduceTopic("sgo"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// readN has a member accept n records, then leave; it answers the
	// delivery count of each offset of partition 0.
	readN := func(n int) map[int64]int32 {
		t.Helper()
		m, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("sgog"), kgo.ConsumeTopics("sgo"))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		got := map[int64]int32{}
		for len(got) < n {
			fs := m.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("read %v: %v", got, err)
			}
			for _, r := range fs.Records() {
				if r.Partition != 0 {
					t.Fatalf("a record of partition %d, never produced to", r.Partition)
				}
				got[r.Offset] = r.DeliveryCount()
			}
			m.MarkAcks(kgo.AckAccept, fs.Records()...)
			if err := m.FlushAcks(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return got
	}
	readN(10)

	describe := func() map[int32]kadm.ShareOffset {
		t.Helper()
		d, err := adm.DescribeShareGroupOffsets(ctx, "sgog")
		if err != nil || d["sgog"].Err != nil {
			t.Fatalf("describe: %v %+v", err, d)
		}
		return d["sgog"].Offsets["sgo"]
	}
	if o, ok := describe()[0]; !ok || o.StartOffset != 10 || o.Lag != 0 || o.Err != nil {
		t.Fatalf("after reading all, sgo-0 described %+v (present %v), want start 10, lag 0", o, ok)
	}

	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "sgog", "m1", []string{"sgo"}
	if r, err := hb.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("join: %v %v", err, r)
	}
	to4 := kadm.Offsets{"sgo": {0: {Topic: "sgo", Partition: 0, At: 4}}}
	if _, err := adm.AlterShareGroupOffsets(ctx, "sgog", to4); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("with a member: %v, want NON_EMPTY_GROUP", err)
	}
	leave := kmsg.NewPtrShareGroupHeartbeatRequest()
	leave.GroupID, leave.MemberID, leave.MemberEpoch = "sgog", "m1", -1
	if r, err := leave.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("leave: %v %v", err, r)
	}
	to4["nope"] = map[int32]kadm.Offset{0: {Topic: "nope", Partition: 0, At: 1}}
	res, err := adm.AlterShareGroupOffsets(ctx, "sgog", to4)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := res.Lookup("sgo", 0); !ok || e != nil {
		t.Fatalf("sgo-0: %v (present %v)", e, ok)
	}
	if e, _ := res.Lookup("nope", 0); !errors.Is(e, kerr.UnknownTopicOrPartition) {
		t.Fatalf("an unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", e)
	}
	offs := describe()
	if o := offs[0]; o.StartOffset != 4 || o.Lag != 6 {
		t.Fatalf("after the alter, sgo-0 described %+v, want start 4, lag 6", o)
	}
	if o, ok := offs[1]; !ok || o.StartOffset != 0 || o.Lag != 0 {
		t.Fatalf("sgo-1, empty, described %+v (present %v), want start 0, lag 0, untouched by the alter", o, ok)
	}
	got := readN(6)
	for o := int64(0); o < 10; o++ {
		if want := o >= 4; (got[o] == 1) != want {
			t.Fatalf("after the start was set to 4, delivered %v; want exactly 4-9, each a first delivery", got)
		}
	}
	if o := describe()[0]; o.StartOffset != 10 || o.Lag != 0 {
		t.Fatalf("after reading again, sgo-0 described %+v, want start 10, lag 0", o)
	}

	// The same over gRPC's Groups service.
	groups := quirev1.NewGroupsClient(dial(t, b).conn)
	alt, err := groups.AlterShareGroupOffsets(ctx, &quirev1.AlterShareGroupOffsetsRequest{Group: "sgog", Offsets: []*quirev1.ShareStartOffset{
		{Topic: "sgo", Partition: 0, StartOffset: 8}, {Topic: "sgo", Partition: 5, StartOffset: 1}}})
	if err != nil || len(alt.Partitions) != 2 || alt.Partitions[0].Error != nil ||
		alt.Partitions[1].GetError().GetCode() != quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("gRPC alter: %v %v", alt, err)
	}
	desc, err := groups.DescribeShareGroupOffsets(ctx, &quirev1.DescribeShareGroupOffsetsRequest{Group: "sgog"})
	if err != nil || len(desc.Partitions) != 2 {
		t.Fatalf("gRPC describe: %v %v", desc, err)
	}
	if p := desc.Partitions[0]; p.Topic != "sgo" || p.Partition != 0 || p.StartOffset != 8 || p.Lag != 2 || p.Error != nil {
		t.Fatalf("gRPC describe of sgo-0: %v, want start 8, lag 2", p)
	}
	if _, err := groups.DescribeShareGroupOffsets(ctx, &quirev1.DescribeShareGroupOffsetsRequest{Group: "nogroup"}); status.Code(err) != codes.NotFound {
		t.Fatalf("gRPC describe of an unknown group: %v, want NOT_FOUND", err)
	}
}

// TestBrokerKafkaDeadLettersAutoCreated: with
// errors.deadletterqueue.auto.create.topics.enable, a share group's
// dead-letter topic that does not exist is created at its first dead
// letter, open to groups' dead letters, and the rejected records land in
// it as Kafka writes them (KIP-1191): the __dlq.errors.* headers naming
// each record, in partition (source partition mod partitions: 2 mod 2),
// and
// without the record's key and value unless the group sets
// errors.deadletterqueue.copy.record.enable.
func TestBrokerKafkaDeadLettersAutoCreated(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
		c.DeadLetterAutoCreate = true
		c.NumPartitions = 2
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, addr)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "aso"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the group's settings", func() error {
		if code, msg := alterGroup(t, ctx, cl, "asg", setOp("share.auto.offset.reset", "earliest"), setOp("errors.deadletterqueue.topic.name", "dlq.asg")); code != 0 {
			return fmt.Errorf("%v: %s", kerr.ErrorForCode(code), msg)
		}
		return nil
	})
	prod := kafkaClient(t, addr, kgo.DefaultProduceTopic("aso"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 2, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("asg"), kgo.ConsumeTopics("aso"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for rejected := 0; rejected < 3; {
		fs := m.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("rejected %d: %v", rejected, err)
		}
		m.MarkAcks(kgo.AckReject, fs.Records()...)
		if err := m.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
		rejected += len(fs.Records())
	}

	var got []*kgo.Record
	poll.Until(t, "the three dead letters in the created topic", func() error {
		td, err := adm.ListTopics(ctx, "dlq.asg")
		if err != nil || td["dlq.asg"].Err != nil {
			return fmt.Errorf("dlq.asg: %v %v", err, td["dlq.asg"].Err)
		}
		if n := len(td["dlq.asg"].Partitions); n != 2 {
			return fmt.Errorf("dlq.asg has %d partitions, want num.partitions 2", n)
		}
		rc, err := adm.DescribeTopicConfigs(ctx, "dlq.asg")
		if err != nil {
			return err
		}
		if v, err := rc.On("dlq.asg", nil); err != nil || !slices.ContainsFunc(v.Configs, func(c kadm.Config) bool {
			return c.Key == "errors.deadletterqueue.group.enable" && c.MaybeValue() == "true"
		}) {
			return fmt.Errorf("dlq.asg is not open to groups' dead letters: %+v %v", v.Configs, err)
		}
		r, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("dlq.asg"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return err
		}
		defer r.Close()
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		got = got[:0]
		for len(got) < 3 && rctx.Err() == nil {
			got = append(got, r.PollFetches(rctx).Records()...)
		}
		if len(got) != 3 {
			return fmt.Errorf("%d dead letters, want 3", len(got))
		}
		return nil
	})
	for _, r := range got {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		if r.Partition != 0 || r.Key != nil || len(r.Value) != 0 || h["__dlq.errors.topic"] != "aso" || h["__dlq.errors.partition"] != "2" ||
			h["__dlq.errors.group"] != "asg" || h["__dlq.errors.delivery.count"] != "1" || h["__dlq.errors.message"] != "Offset rejected by client." {
			t.Errorf("dead letter in partition %d: key %q, value %q, headers %v", r.Partition, r.Key, r.Value, h)
		}
	}
}
