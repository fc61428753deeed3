package kafkaclients

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/internal/poll"
)

// Requests where the node once answered otherwise than Kafka, sent as the
// named clients send them to an in-process node: each answer comes from
// the node's real coordinator, logs and metadata, not a fake.

// TestNewMemberListingOwnedPartitionsJoins: a classic member new to its
// group whose subscription lists partitions it owned (franz-go's
// cooperative-sticky after its member was removed: subscription v3 with
// its old partitions and generation -1, a member id fresh from
// MEMBER_ID_REQUIRED) joins, as on Kafka, whose coordinator never reads
// the list; it was UNKNOWN_MEMBER_ID, and the client, listing the same
// partitions again, never joined. The subscription's bytes are franz-go's
// own: its cooperative-sticky balancer's JoinGroupMetadata, as its group
// consumer calls it (with the user data of its sticky assignor too).
func TestNewMemberListingOwnedPartitionsJoins(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	cl := kgoClient(t, addr)
	poll.Until(t, "topic owned-t made and led", func() error { return topicLed(cl, "owned-t") })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	subscription := kgo.CooperativeStickyBalancer().JoinGroupMetadata([]string{"owned-t"}, map[string][]int32{"owned-t": {0, 1}}, -1)
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(subscription); err != nil || meta.Version != 3 || len(meta.OwnedPartitions) != 1 || meta.Generation != -1 {
		t.Fatalf("franz-go's subscription is not v3 with owned partitions and generation -1: %+v (%v)", meta, err)
	}
	join := func(member string) *kmsg.JoinGroupResponse {
		t.Helper()
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = "owned-g", member, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 45000, 60000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "cooperative-sticky", subscription
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("join: %v", err)
		}
		return resp
	}
	r := join("")
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		t.Fatalf("first join: code %d member %q, want MEMBER_ID_REQUIRED with an id", r.ErrorCode, r.MemberID)
	}
	r = join(r.MemberID)
	if r.ErrorCode != 0 || r.Generation < 1 {
		t.Fatalf("a new member listing owned partitions: code %d (%v) generation %d, want joined", r.ErrorCode, kerr.ErrorForCode(r.ErrorCode), r.Generation)
	}
	// Alone in the group, it is given every partition.
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "owned-g", r.MemberID, r.Generation
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("cooperative-sticky")
	sr, err := sync.RequestWith(ctx, cl)
	if err != nil || sr.ErrorCode != 0 {
		t.Fatalf("sync: %v, code %d", err, sr.ErrorCode)
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(sr.MemberAssignment); err != nil || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != partitions {
		t.Fatalf("assignment %+v (%v), want all %d partitions", a.Topics, err, partitions)
	}
}

// TestFranzGoTransactionalProducerCommits: franz-go's transactional
// producer (once refused UNSUPPORTED_VERSION, when the node had no
// transaction coordinator) begins, writes to an auto-created topic and
// commits.
func TestFranzGoTransactionalProducerCommits(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	cl := kgoClient(t, addr, kgo.TransactionalID("tx-1"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("tx-t"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// TestMetadataInternalTopicsNotCreated: a metadata request naming
// __consumer_offsets with auto-creation allowed (as a tool probing for
// Kafka's internal topics sends it) is UNKNOWN_TOPIC_OR_PARTITION and
// makes no topic; another topic named in the same request is made.
func TestMetadataInternalTopicsNotCreated(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	cl := kgoClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ask := func(allow bool, names ...string) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = allow
		if names != nil {
			for _, n := range names {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(n)
				req.Topics = append(req.Topics, rt)
			}
		} else {
			req.Topics = nil // all
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("metadata: %v", err)
		}
		out := map[string]int16{}
		for _, tp := range resp.Topics {
			out[*tp.Topic] = tp.ErrorCode
		}
		return out
	}
	got := ask(true, "__consumer_offsets", "ordinary", "__transaction_state")
	if got["__consumer_offsets"] != kerr.UnknownTopicOrPartition.Code || got["__transaction_state"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("internal topics: %v, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	all := ask(false)
	if _, ok := all["__consumer_offsets"]; ok {
		t.Fatalf("__consumer_offsets was made: %v", all)
	}
	if _, ok := all["ordinary"]; !ok {
		t.Fatalf("the ordinary topic asked for with it was not made: %v", all)
	}
}

// TestOffsetForLeaderEpochAtTheLeader: OffsetForLeaderEpoch as franz-go
// sends it (v4, replica id -1) to validate its position (KIP-320): the
// leader's current epoch ends at its log end, an epoch newer than any is
// unknown (-1, -1), and a current leader epoch ahead of the leader's is
// UNKNOWN_LEADER_EPOCH; and franz-go's own request, sent as it validates
// a start offset of a known epoch, is answered and it consumes from
// that offset.
func TestOffsetForLeaderEpochAtTheLeader(t *testing.T) {
	t.Parallel()
	addr := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produce(ctx, t, addr, "ofle", 8) // two records in each partition
	cl := kgoClient(t, addr)
	md := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("ofle")
	md.Topics = append(md.Topics, rt)
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) != partitions {
		t.Fatalf("metadata: %v %+v", err, mresp)
	}
	epoch := mresp.Topics[0].Partitions[0].LeaderEpoch

	ask := func(current, e int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		qt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		qt.Topic = "ofle"
		qp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		qp.Partition, qp.CurrentLeaderEpoch, qp.LeaderEpoch = 0, current, e
		qt.Partitions = append(qt.Partitions, qp)
		req.Topics = append(req.Topics, qt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("OffsetForLeaderEpoch: %v %+v", err, resp)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := ask(epoch, epoch); p.ErrorCode != 0 || p.LeaderEpoch != epoch || p.EndOffset != 2 {
		t.Fatalf("epoch %d: %+v, want it to end at the log end, 2", epoch, p)
	}
	if p := ask(epoch, epoch+5); p.ErrorCode != 0 || p.LeaderEpoch != -1 || p.EndOffset != -1 {
		t.Fatalf("an epoch newer than any: %+v, want -1, -1", p)
	}
	if p := ask(epoch+1, epoch); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("a current epoch ahead of the leader's: %+v, want UNKNOWN_LEADER_EPOCH", p)
	}

	// franz-go's own request: a consumer told to start at an offset of
	// a known epoch validates it with OffsetForLeaderEpoch before it
	// fetches (KIP-320), then reads from that offset.
	hook := &epochRequests{}
	cons := kgoClient(t, addr, kgo.WithHooks(hook),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"ofle": {0: kgo.NewOffset().At(1).WithEpoch(epoch)}}))
	var got []int64
	for len(got) < 1 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %v, want offset 1", got)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
	}
	if got[0] != 1 {
		t.Fatalf("franz-go validated offset 1 of epoch %d and consumed from %d", epoch, got[0])
	}
	if w, r := hook.counts(); w == 0 || r == 0 {
		t.Fatalf("franz-go sent %d OffsetForLeaderEpoch requests and read %d answers, want its own request answered", w, r)
	}
}

// epochRequests counts the OffsetForLeaderEpoch requests a franz-go
// client writes and the answers it reads without error.
type epochRequests struct {
	mu            sync.Mutex
	writes, reads int
}

func (e *epochRequests) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.OffsetForLeaderEpoch) && err == nil {
		e.mu.Lock()
		e.writes++
		e.mu.Unlock()
	}
}

func (e *epochRequests) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.OffsetForLeaderEpoch) && err == nil {
		e.mu.Lock()
		e.reads++
		e.mu.Unlock()
	}
}

func (e *epochRequests) counts() (int, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.writes, e.reads
}
