package broker_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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

// startKafkaBroker starts a dev broker with a gRPC listener and a Kafka
// one, and returns the Kafka one's address.
func startKafkaBroker(t testing.TB) (*broker.Broker, string) {
	t.Helper()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	return b, addr
}

func kafkaClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.MetadataMinAge(100 * time.Millisecond), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// franz-go's client, with its defaults (an idempotent producer, acks=all),
// produces to an auto-created topic over the Kafka listener and reads
// every record back in order, keys, values and headers intact.
func TestBrokerKafkaProduceConsume(t *testing.T) {
	t.Parallel()
	_, addr := startKafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := kafkaClient(t, addr, kgo.DefaultProduceTopic("kt"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 500
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Partition: 0, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}}})
	}
	results := prod.ProduceSync(ctx, recs...)
	if err := results.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for i, r := range results {
		if r.Record.Offset != int64(i) {
			t.Fatalf("record %d got offset %d", i, r.Record.Offset)
		}
	}

	cons := kafkaClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kt": {0: kgo.NewOffset().AtStart()}}))
	var got []*kgo.Record
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	for i, r := range got {
		if r.Offset != int64(i) || string(r.Key) != fmt.Sprintf("k%d", i) || string(r.Value) != fmt.Sprintf("v%d", i) ||
			len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprint(i) {
			t.Fatalf("record %d: offset %d key %q value %q headers %v", i, r.Offset, r.Key, r.Value, r.Headers)
		}
	}
}

// Errors come back as Kafka's codes: a fetch past the end is
// OFFSET_OUT_OF_RANGE, a produce with acks=1 to a topic that cannot be
// created fails with the broker's reason.
func TestBrokerKafkaErrors(t *testing.T) {
	t.Parallel()
	_, addr := startKafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := kafkaClient(t, addr, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
		kgo.RecordDeliveryTimeout(5*time.Second))
	err := prod.ProduceSync(ctx, &kgo.Record{Topic: "bad topic!", Value: []byte("x")}).FirstErr()
	if err == nil {
		t.Fatal("produce to an invalid topic name succeeded")
	}
	if !errors.Is(err, kerr.InvalidTopicException) && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("produce to an invalid topic name: %v, want INVALID_TOPIC_EXCEPTION or UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "ke", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := kafkaClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"ke": {0: kgo.NewOffset().At(100)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	for {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no OFFSET_OUT_OF_RANGE for a fetch at 100 of a 1-record log")
		}
		var fetchErr error
		fs.EachError(func(_ string, _ int32, err error) { fetchErr = err })
		if fetchErr != nil {
			if !errors.Is(fetchErr, kerr.OffsetOutOfRange) && !strings.Contains(fetchErr.Error(), "OFFSET_OUT_OF_RANGE") {
				t.Fatalf("fetch at 100: %v, want OFFSET_OUT_OF_RANGE", fetchErr)
			}
			return
		}
	}
}

// DeleteRecords over Kafka's protocol (as kafka-delete-records.sh or an
// admin client sends it) moves the log start: the answer's low watermark,
// and a consumer from the start begins there.
func TestBrokerKafkaDeleteRecords(t *testing.T) {
	t.Parallel()
	_, addr := startKafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kafkaClient(t, addr, kgo.DefaultProduceTopic("kdr"))
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version, req.TimeoutMillis = 2, 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "kdr"
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 4
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 4 {
		t.Fatalf("DeleteRecords before 4: %+v", p)
	}
	cons := kafkaClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kdr": {0: kgo.NewOffset().AtStart()}}))
	fs := cons.PollFetches(ctx)
	fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != 4 || string(recs[0].Value) != "4" {
		t.Fatalf("consumed from the start after the deletion: %v", recs)
	}
}

// kafka.listener.names names listeners other than the inter-broker one
// (their security: kafka_security_test.go).
func TestBrokerConfigKafkaListenerNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listeners, kafka string
		tls, authz       bool
		wantErr          string // "" = valid
	}{
		{"PLAINTEXT://:9092,KAFKA://:9093", "KAFKA", false, false, ""},
		{"PLAINTEXT://:9092,KAFKA://:9093", " kafka ", false, false, ""},
		{"PLAINTEXT://:9092", "", false, false, ""},
		{"PLAINTEXT://:9092,KAFKA://:9093", "OTHER", false, false, "OTHER is not one of the listeners (PLAINTEXT, KAFKA)"},
		{"PLAINTEXT://:9092,KAFKA://:9093", "PLAINTEXT", false, false, "PLAINTEXT is the inter-broker listener"},
		{"PLAINTEXT://:9092,KAFKA://:9093", "KAFKA,", false, false, "empty entry"},
		{"PLAINTEXT://:9092,KAFKA://:9093", "KAFKA", true, false, ""}, // SSL by default beside TLS
	} {
		c := broker.DefaultConfig()
		c.ListenAddr, c.KafkaListenerNames = tc.listeners, tc.kafka
		c.Security.AuthorizerEnable = tc.authz
		if tc.tls {
			c.Security.TLSCertFile, c.Security.TLSKeyFile = "cert.pem", "key.pem"
		}
		err := c.Validate()
		if tc.tls && err != nil && !strings.Contains(err.Error(), "kafka.listener.names") {
			err = nil // the files do not exist: only the kafka error matters here
		}
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q / %q: %v", tc.listeners, tc.kafka, err)
		case tc.wantErr != "" && (!errors.Is(err, broker.ErrInvalidConfig) || !strings.Contains(err.Error(), "kafka.listener.names: "+tc.wantErr) && !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q / %q: got %v, want an invalid config error with %q", tc.listeners, tc.kafka, err, tc.wantErr)
		}
	}
}

// A Kafka producer fills one request with a batch for each of many
// partitions (here 16 of 900 KiB, 14 MB): the Kafka listener takes
// requests up to Kafka's socket.request.max.bytes (100 MiB), each batch
// still held to message.max.bytes.
func TestBrokerKafkaLargeMultiPartitionRequest(t *testing.T) {
	t.Parallel()
	b, addr := startKafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := dial(t, b).admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "kbig",
		OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 16}}); err != nil {
		t.Fatal(err)
	}
	prod := kafkaClient(t, addr, kgo.DefaultProduceTopic("kbig"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Second), kgo.MaxBufferedBytes(64<<20))
	var recs []*kgo.Record
	for p := range int32(16) {
		v := make([]byte, 900<<10) // random: the client compresses
		_, _ = rand.Read(v)
		recs = append(recs, &kgo.Record{Partition: p, Value: v})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("16 × 900 KiB in one produce: %v", err)
	}
	for _, r := range recs {
		if r.Offset != 0 {
			t.Fatalf("partition %d: offset %d, want 0", r.Partition, r.Offset)
		}
	}
}

// franz-go's group consumer in KIP-848's protocol (ServerSideBalancer):
// two members of one group share a topic's partitions, the coordinator
// assigning them, read every record once between them and commit; a
// member of the same group started afterwards begins at the committed
// offsets, reading only what was produced since.
// TestBrokerKafkaConsumerGroup runs a group of two franz-go consumers in
// each of the protocols: KIP-848's, the classic one with the cooperative
// and an eager balancer, and one member of each kind.
func TestBrokerKafkaConsumerGroup(t *testing.T) {
	t.Parallel()
	kip848 := groupProtocol{kgo.ServerSideBalancer(), false}
	cooperative := groupProtocol{kgo.Balancers(kgo.CooperativeStickyBalancer()), true}
	eager := groupProtocol{kgo.Balancers(kgo.RangeBalancer()), true}
	for _, tc := range []struct {
		name string
		opts [2]groupProtocol // the first member's (and the third's), the second's
	}{
		{"kip848", [2]groupProtocol{kip848, kip848}},
		{"classic-cooperative", [2]groupProtocol{cooperative, cooperative}},
		{"classic-eager", [2]groupProtocol{eager, eager}},
		{"mixed", [2]groupProtocol{eager, kip848}},
	} {
		t.Run(tc.name, func(t *testing.T) { testKafkaConsumerGroup(t, tc.opts[0], tc.opts[1]) })
	}
}

// groupProtocol is how a franz-go member joins: its option, and whether
// that is the classic protocol.
type groupProtocol struct {
	opt     kgo.Opt
	classic bool
}

func testKafkaConsumerGroup(t *testing.T, protocols ...groupProtocol) {
	b, addr := startKafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := dial(t, b).admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "kg",
		OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 4}}); err != nil {
		t.Fatal(err)
	}
	prod := kafkaClient(t, addr, kgo.DefaultProduceTopic("kg"))
	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 400)
	member := func(protocol groupProtocol) *kgo.Client {
		// Rebalances wait while a member holds records it has not
		// committed (BlockRebalanceOnPoll until AllowRebalance), so no
		// record is read twice.
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("kgroup"), kgo.ConsumeTopics("kg"),
			protocol.opt, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.BlockRebalanceOnPoll(),
			kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	m1, m2 := member(protocols[0]), member(protocols[1])
	seen := map[string]int{}
	var mu sync.Mutex
	consume := func(cl *kgo.Client, stop <-chan struct{}, done chan<- error) {
		for {
			select {
			case <-stop:
				done <- cl.CommitUncommittedOffsets(ctx)
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
			mu.Unlock()
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				done <- fmt.Errorf("commit: %w", err)
				return
			}
			cl.AllowRebalance()
		}
	}
	stop := make(chan struct{})
	done := make(chan error, 2)
	go consume(m1, stop, done)
	go consume(m2, stop, done)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == 400 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the two members read %d of 400 records", n)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	// The coordinator shares the four partitions between the two, each
	// a classic member (with an id the listener made: the client id, a
	// UUID) or a KIP-848 one as it joined.
	groups := quirev1.NewGroupsClient(dial(t, b).conn)
	for {
		classic := map[string]bool{}
		for i, m := range []*kgo.Client{m1, m2} {
			id, _ := m.GroupMetadata()
			classic[id] = protocols[i].classic
		}
		d, err := groups.DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "kgroup"})
		if err != nil {
			t.Fatal(err)
		}
		shared := d.State == "stable" && len(d.Members) == 2
		for _, m := range d.Members {
			if _, known := classic[m.MemberId]; !known {
				shared = false // a member id its client has not taken yet
				continue
			}
			if got, want := strings.HasPrefix(m.MemberId, "kgo-") && len(m.MemberId) == len("kgo-")+36, classic[m.MemberId]; got != want {
				t.Fatalf("member %q: classic %v, want %v (members %v)", m.MemberId, got, want, classic)
			}
			n := 0
			for _, at := range m.GetAssigned().GetTopics() {
				n += len(at.Partitions)
			}
			shared = shared && n == 2
		}
		if shared {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the group did not settle with two partitions a member: %v", d)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	// Kafka's admin requests see the same group.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"kgroup"}
	dr, err := dg.RequestWith(ctx, prod)
	if err != nil {
		t.Fatal(err)
	}
	if g := dr.Groups[0]; g.ErrorCode != 0 || g.State != "Stable" || g.ProtocolType != "consumer" || len(g.Members) != 2 {
		t.Fatalf("DescribeGroups over Kafka's protocol: %+v", g)
	}
	for _, m := range dr.Groups[0].Members {
		if m.ClientHost != "127.0.0.1" {
			t.Fatalf("DescribeGroups: member %s at host %q, want 127.0.0.1", m.MemberID, m.ClientHost)
		}
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(m.MemberAssignment); err != nil || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 2 {
			t.Fatalf("DescribeGroups: member %s assigned %+v (%v)", m.MemberID, a, err)
		}
	}
	// ListGroups (v4, the highest both ends speak) with its state, and
	// filtered by states.
	for _, tc := range []struct {
		states []string
		want   string
	}{{nil, "[kgroup=Stable]"}, {[]string{"Stable"}, "[kgroup=Stable]"}, {[]string{"Empty", "Dead"}, "[]"}} {
		lg := kmsg.NewPtrListGroupsRequest()
		lg.StatesFilter = tc.states
		lr, err := lg.RequestWith(ctx, prod)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range lr.Groups {
			got = append(got, g.Group+"="+g.GroupState)
		}
		if lr.ErrorCode != 0 || lr.Version != 4 || fmt.Sprint(got) != tc.want {
			t.Fatalf("ListGroups v%d states %v: %v (code %d), want %s", lr.Version, tc.states, got, lr.ErrorCode, tc.want)
		}
	}
	close(stop)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	m1.Close()
	m2.Close()
	mu.Lock()
	for v, n := range seen {
		if n != 1 {
			t.Errorf("record %s read %d times by the group's two members", v, n)
		}
	}
	mu.Unlock()

	// The group's committed offsets, asked over gRPC, cover all 400.
	offs, err := groups.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "kgroup"})
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	for _, o := range offs.Offsets {
		committed += o.Offset
	}
	if committed != 400 {
		t.Fatalf("committed offsets sum to %d, want 400: %v", committed, offs.Offsets)
	}

	produce(400, 410)
	m3 := member(protocols[0])
	defer func() {
		m3.AllowRebalance() // its leave waits for it
		m3.Close()
	}()
	var later []string
	for len(later) < 10 {
		fs := m3.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the third member read %v, want the 10 records produced after the commit", later)
		}
		fs.EachRecord(func(r *kgo.Record) { later = append(later, string(r.Value)) })
	}
	for _, v := range later {
		if seen[v] != 0 {
			t.Fatalf("the third member read %s again: it did not start at the committed offsets (read %v)", v, later)
		}
	}
}

// TestBrokerKafkaStaticMember: a franz-go member with an instance id
// (group.instance.id) that closes and starts again, as a KIP-848 member
// (which leaves with epoch -2) or a classic one (which sends no
// LeaveGroup), is back in its place with no rebalance: the new process,
// under a new member id, has the old one's partitions at once, the group
// epoch has not moved, and the other member kept its own. Kafka's
// DescribeGroups shows the instance id.
func TestBrokerKafkaStaticMember(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		protocol groupProtocol
	}{
		{"kip848", groupProtocol{kgo.ServerSideBalancer(), false}},
		{"classic", groupProtocol{kgo.Balancers(kgo.CooperativeStickyBalancer()), true}},
	} {
		t.Run(tc.name, func(t *testing.T) { testKafkaStaticMember(t, tc.protocol) })
	}
}

func testKafkaStaticMember(t *testing.T, protocol groupProtocol) {
	b, addr := startKafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := dial(t, b).admin.CreateTopic(ctx, &quirev1.CreateTopicRequest{Name: "ks",
		OptionalPartitions: &quirev1.CreateTopicRequest_Partitions{Partitions: 4}}); err != nil {
		t.Fatal(err)
	}
	// A member joining before the new node has raised metadata.version
	// to the level that keeps instance ids would be dynamic (and, below
	// the groups' level, franz-go falls back to the classic protocol).
	brokertest.WaitMetadataVersion(t, b, metadata.LatestMetadataVersion)
	member := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup("kstatic"), kgo.ConsumeTopics("ks"),
			protocol.opt, kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	groups := quirev1.NewGroupsClient(dial(t, b).conn)
	type placed struct {
		id       string
		assigned string
	}
	// settled waits for the group to be stable with two members, two
	// partitions each, and for ok; it returns the group epoch and the
	// static and the dynamic member.
	settled := func(ok func(static, dynamic placed) bool) (int32, placed, placed) {
		t.Helper()
		for {
			d, err := groups.DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "kstatic"})
			if err != nil && status.Code(err) != codes.NotFound {
				t.Fatal(err)
			}
			var static, dynamic placed
			n := 0
			for _, m := range d.GetMembers() {
				p := placed{m.MemberId, fmt.Sprint(m.GetAssigned().GetTopics())}
				for _, at := range m.GetAssigned().GetTopics() {
					n += len(at.Partitions)
				}
				if m.InstanceId == "host-1" {
					static = p
				} else {
					dynamic = p
				}
			}
			if d.GetState() == "stable" && len(d.Members) == 2 && n == 4 && static.id != "" && dynamic.id != "" && ok(static, dynamic) {
				return d.GroupEpoch, static, dynamic
			}
			if ctx.Err() != nil {
				t.Fatalf("the group did not settle: %v", d)
			}
			time.Sleep(20 * time.Millisecond) // polling with a deadline
		}
	}
	// A classic member's own session timeout (6 s, the least allowed)
	// applies, not the coordinator's 45 s.
	staticOpts := []kgo.Opt{kgo.InstanceID("host-1")}
	if protocol.classic {
		staticOpts = append(staticOpts, kgo.SessionTimeout(6*time.Second))
	}
	first := member(staticOpts...)
	member()
	epoch, static, dynamic := settled(func(placed, placed) bool { return true })

	first.Close()
	second := member(staticOpts...)
	epoch2, static2, dynamic2 := settled(func(s, _ placed) bool { return s.id != static.id })
	if epoch2 != epoch || static2.assigned != static.assigned || dynamic2 != dynamic {
		t.Fatalf("after the static member's restart: epoch %d, static %+v, other %+v; before: epoch %d, static %+v, other %+v",
			epoch2, static2, dynamic2, epoch, static, dynamic)
	}
	// The coordinator lists the member once it has answered its join; the
	// client learns its member id only when it has read that answer,
	// which on a loaded machine may come after the group looks settled.
	var id string
	poll.Until(t, "the restarted member to read its member id from its join's answer", func() error {
		if id, _ = second.GroupMetadata(); id == "" {
			return fmt.Errorf("no member id yet; the group's static member is %q", static2.id)
		}
		return nil
	})
	if id != static2.id {
		t.Fatalf("the restarted member is %q, the group's static member %q", id, static2.id)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"kstatic"}
	dr, err := dg.RequestWith(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	instances := map[string]string{}
	for _, m := range dr.Groups[0].Members {
		if m.InstanceID != nil {
			instances[m.MemberID] = *m.InstanceID
		}
	}
	if len(instances) != 1 || instances[static2.id] != "host-1" {
		t.Fatalf("DescribeGroups: instance ids %v, want %s: host-1", instances, static2.id)
	}
	if !protocol.classic {
		return
	}
	// A static classic member that closes sends no LeaveGroup: it is
	// removed when its own 6 s session runs out, well before the
	// coordinator's 45 s.
	second.Close()
	gone, cancelGone := context.WithTimeout(ctx, 30*time.Second)
	defer cancelGone()
	for {
		d, err := groups.DescribeGroup(gone, &quirev1.DescribeGroupRequest{Group: "kstatic"})
		if err == nil && len(d.Members) == 1 && d.Members[0].InstanceId == "" {
			break
		}
		if gone.Err() != nil {
			t.Fatalf("30 s after the static member closed, with a 6 s session timeout: %v (%v)", d, err)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
}
