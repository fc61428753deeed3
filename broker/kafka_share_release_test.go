package broker_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/broker/brokertest"
	"github.com/quirelog/quire/internal/poll"
)

// rawKafka is a client connection of its own: its share sessions are
// the connection's, and end with it.
type rawKafka struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

func dialKafka(t *testing.T, addr string) *rawKafka {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	return &rawKafka{t: t, c: c, r: bufio.NewReader(c)}
}

// do sends req at its version and reads its answer.
func (k *rawKafka) do(req kmsg.Request) kmsg.Response {
	k.t.Helper()
	k.corr++
	if _, err := k.c.Write(kafkaFrame(req, k.corr)); err != nil {
		k.t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(k.r, size[:]); err != nil {
		k.t.Fatal(err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(k.r, buf); err != nil {
		k.t.Fatal(err)
	}
	body := buf[4:] // correlation id
	if req.IsFlexible() {
		body = body[1:] // header tags
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		k.t.Fatal(err)
	}
	return resp
}

// shareSession is a member's share session on one partition, over a
// connection of its own.
type shareSession struct {
	k             *rawKafka
	group, member string
	topic         [16]byte
	epoch         int32
	lockMillis    int32
}

// fetch makes a ShareFetch of partition 0, acknowledging acks (offset:
// type), waiting up to wait for records; epoch -1 closes the session.
// It returns the ranges acquired (first-last@count).
func (s *shareSession) fetch(wait time.Duration, acks map[int64]int8) []string {
	s.k.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(s.group), kmsg.StringPtr(s.member), s.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = int32(wait.Milliseconds()), 1, 1<<20, 100, 100
	tp := kmsg.NewShareFetchRequestTopicPartition()
	for _, o := range slices.Sorted(maps.Keys(acks)) {
		tp.AcknowledgementBatches = append(tp.AcknowledgementBatches, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: o, LastOffset: o, AcknowledgeTypes: []int8{acks[o]}})
	}
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID, rt.Partitions = s.topic, []kmsg.ShareFetchRequestTopicPartition{tp}
	req.Topics = append(req.Topics, rt)
	resp := s.k.do(req).(*kmsg.ShareFetchResponse)
	if resp.ErrorCode != 0 {
		s.k.t.Fatalf("%s's share fetch at epoch %d: %v", s.member, s.epoch, kerr.ErrorForCode(resp.ErrorCode))
	}
	s.epoch++
	s.lockMillis = resp.AcquisitionLockTimeoutMillis
	var got []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.AcknowledgeErrorCode != 0 {
				s.k.t.Fatalf("%s's share fetch: partition %d: %v, acknowledgement %v", s.member, p.Partition,
					kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(p.AcknowledgeErrorCode))
			}
			for _, a := range p.AcquiredRecords {
				got = append(got, fmt.Sprintf("%d-%d@%d", a.FirstOffset, a.LastOffset, a.DeliveryCount))
			}
		}
	}
	return got
}

// startShareRelease starts a broker whose share groups lock records for
// 5 minutes, with per-key ordering, and produces 4 records of 2 keys to
// partition 0 of topic; it returns the Kafka address and the topic's
// id, members a and b having joined group.
func startShareRelease(t *testing.T, topic, group string) (string, [16]byte) {
	t.Helper()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.ListenAddr = "PLAINTEXT://127.0.0.1:0,KAFKA://127.0.0.1:0"
		c.KafkaListenerNames = "kafka"
		c.ShareAutoOffsetReset = "earliest"
		c.ShareKeyOrdering = true
		c.GroupShareRecordLockDurationMs = (5 * time.Minute).Milliseconds()
	})
	addr, ok := b.ListenerAddr("KAFKA")
	if !ok {
		t.Fatal("no KAFKA listener")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 4 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%2), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var id [16]byte
	for _, tm := range md.Topics {
		if tm.Topic != nil && *tm.Topic == topic {
			id = tm.TopicID
		}
	}
	if id == ([16]byte{}) {
		t.Fatalf("no id for topic %s", topic)
	}
	for _, m := range []string{"a", "b"} {
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = group, m, []string{topic}
		if r, err := hb.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
			t.Fatalf("%s joins: %v %v", m, err, r)
		}
	}
	return addr, id
}

// A share consumer's connection ends (a crash, a cut) while it holds
// records: they are released at once, keys and all, for the group's
// other members, far before their 5-minute locks would run out.
func TestBrokerKafkaShareReleasedOnDisconnect(t *testing.T) {
	t.Parallel()
	addr, id := startShareRelease(t, "srd", "sgrd")
	a := &shareSession{k: dialKafka(t, addr), group: "sgrd", member: "a", topic: id}
	if got := a.fetch(10*time.Second, nil); !slices.Equal(got, []string{"0-3@1"}) {
		t.Fatalf("a acquired %v, want 0-3", got)
	}
	if a.lockMillis != 300_000 {
		t.Fatalf("locks of %d ms, want 5 minutes", a.lockMillis)
	}
	b := &shareSession{k: dialKafka(t, addr), group: "sgrd", member: "b", topic: id}
	if got := b.fetch(0, nil); len(got) != 0 {
		t.Fatalf("b acquired %v while a holds every record", got)
	}
	_ = a.k.c.Close()
	var got []string
	poll.Until(t, "b to acquire a's records", func() error {
		got = append(got, b.fetch(0, nil)...)
		if len(got) == 0 {
			return fmt.Errorf("nothing acquired")
		}
		return nil
	})
	if !slices.Equal(got, []string{"0-3@2"}) {
		t.Fatalf("b acquired %v, want 0-3 delivered a second time", got)
	}
}

// A share session closed by its member (epoch -1) applies its
// acknowledgements, then releases what the member still holds: another
// member acquires it with the next fetch.
func TestBrokerKafkaShareReleasedOnSessionClose(t *testing.T) {
	t.Parallel()
	addr, id := startShareRelease(t, "src", "sgrc")
	a := &shareSession{k: dialKafka(t, addr), group: "sgrc", member: "a", topic: id}
	if got := a.fetch(10*time.Second, nil); !slices.Equal(got, []string{"0-3@1"}) {
		t.Fatalf("a acquired %v, want 0-3", got)
	}
	a.epoch = -1
	if got := a.fetch(0, map[int64]int8{0: 1, 1: 1}); len(got) != 0 {
		t.Fatalf("the closing fetch acquired %v", got)
	}
	b := &shareSession{k: dialKafka(t, addr), group: "sgrc", member: "b", topic: id}
	if got := b.fetch(0, nil); !slices.Equal(got, []string{"2-3@2"}) {
		t.Fatalf("b acquired %v after a closed its session, want 2-3 delivered a second time", got)
	}
	// a's connection is open, its session gone.
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr("sgrc"), kmsg.StringPtr("a"), 1
	if resp := a.k.do(req).(*kmsg.ShareFetchResponse); resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("a's closed session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
