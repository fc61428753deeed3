package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/testcluster"
)

// subStream is a test client of one Subscribe stream: a reader goroutine
// keeps what arrived (records per partition, the partitions owned, each
// change with the time it was read), and one sender goroutine sends what
// the test (or auto-ack) queues.
type subStream struct {
	t      *testing.T
	name   string
	cancel context.CancelFunc
	send   chan *quirev1.SubscribeRequest // nil: CloseSend
	done   chan struct{}

	mu      sync.Mutex
	autoAck bool
	// lagAck, with autoAck, keeps the SubscribeBatches' acks in unacked
	// (the last batch's next_offset per partition) for ackLagging to
	// send, as a client working on what it got would, and sends a
	// partition's as soon as it is revoking.
	lagAck   bool
	unacked  map[string]*quirev1.AckedOffsets // with lagAck, per partition
	memberID string
	epoch    int32 // the member epoch of the last assignment event
	owned    map[string]bool
	records  map[string][]*quirev1.ConsumedRecord // SubscribeBatch records too, with their batch's topic and partition
	recvAt   map[string][]time.Time               // per partition, when each record was read
	batches  []*quirev1.SubscribeBatch            // every SubscribeBatch, in order
	raws     []*quirev1.SubscribeRawBatch         // every SubscribeRawBatch, in order
	rawNext  map[string]int64                     // per partition, the last SubscribeRawBatch's next_offset
	tokens   map[string][]fencingToken            // per partition, each record's fencing token, as records
	views    []ownView                            // every change of owned, in order
	refused  []*quirev1.SubscribeAckRefused       // acks the broker refused
	err      error                                // how the stream ended (io.EOF: OK)
	changed  chan struct{}
}

// fencingToken is a record's (fencing_epoch, offset).
type fencingToken struct{ epoch, offset int64 }

func (a fencingToken) less(b fencingToken) bool {
	return a.epoch < b.epoch || a.epoch == b.epoch && a.offset < b.offset
}

// ownView is a stream's partitions from a moment on.
type ownView struct {
	at    time.Time
	owned []string
}

func tpName(topic string, p int32) string { return fmt.Sprintf("%s-%d", topic, p) }

func subscribe(t *testing.T, c *testcluster.Cluster, via int32, name string, start *quirev1.SubscribeStart, autoAck bool) *subStream {
	t.Helper()
	return subscribeWith(t, groups(c, via), name, start, autoAck)
}

// subscribeWith is subscribe through a client of the test's choosing
// (one with another principal's credentials).
func subscribeWith(t *testing.T, gc quirev1.GroupsClient, name string, start *quirev1.SubscribeStart, autoAck bool) *subStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := gc.Subscribe(ctx)
	if err != nil {
		cancel()
		t.Fatalf("%s: subscribe: %v", name, err)
	}
	s := &subStream{t: t, name: name, cancel: cancel, send: make(chan *quirev1.SubscribeRequest, 1024), done: make(chan struct{}),
		autoAck: autoAck, owned: map[string]bool{}, records: map[string][]*quirev1.ConsumedRecord{},
		recvAt: map[string][]time.Time{}, rawNext: map[string]int64{}, tokens: map[string][]fencingToken{}, changed: make(chan struct{}),
		unacked: map[string]*quirev1.AckedOffsets{}}
	s.send <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: start}}
	sendDone := make(chan struct{})
	go func() {
		defer close(sendDone)
		for m := range s.send {
			if m == nil {
				_ = stream.CloseSend()
				return
			}
			if stream.Send(m) != nil {
				return
			}
		}
	}()
	go func() {
		defer close(s.done)
		for {
			resp, err := stream.Recv()
			now := time.Now()
			s.mu.Lock()
			if err != nil {
				s.err = err
				s.views = append(s.views, ownView{at: now}) // it owns nothing once ended
				s.signalLocked()
				s.mu.Unlock()
				return
			}
			switch ev := resp.Event.(type) {
			case *quirev1.SubscribeResponse_Assignment:
				s.memberID, s.epoch = ev.Assignment.MemberId, ev.Assignment.MemberEpoch
				for _, p := range ownedSet(ev.Assignment.Revoking) {
					if a := s.unacked[p]; a != nil {
						s.send <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{Partitions: []*quirev1.AckedOffsets{a}}}}
						delete(s.unacked, p)
					}
				}
				for _, p := range ownedSet(ev.Assignment.Revoked) {
					delete(s.unacked, p)
				}
				for _, p := range ownedSet(ev.Assignment.Revoked) {
					delete(s.owned, p)
				}
				for _, p := range ownedSet(ev.Assignment.Assigned) {
					s.owned[p] = true
				}
				if got, want := ownedSet(ev.Assignment.Owned), s.ownedLocked(); !slices.Equal(got, want) {
					s.t.Errorf("%s: owned %v, but assigned and revoked make %v", s.name, got, want)
				}
				s.views = append(s.views, ownView{at: now, owned: s.ownedLocked()})
			case *quirev1.SubscribeResponse_Records:
				ack := &quirev1.SubscribeAck{}
				for _, r := range ev.Records.Records {
					p := tpName(r.Topic, r.Partition)
					if !s.owned[p] {
						s.t.Errorf("%s: record %s@%d of a partition it does not own (owns %v)", s.name, p, r.Offset, s.ownedLocked())
					}
					s.records[p] = append(s.records[p], r)
					s.recvAt[p] = append(s.recvAt[p], now)
					s.tokens[p] = append(s.tokens[p], fencingToken{int64(ev.Records.FencingEpoch), r.Offset})
					ack.Partitions = append(ack.Partitions, &quirev1.AckedOffsets{Topic: r.Topic, Partition: r.Partition, Offsets: []int64{r.Offset}})
				}
				if s.autoAck {
					s.send <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: ack}}
				}
			case *quirev1.SubscribeResponse_Batch:
				b := ev.Batch
				p := tpName(b.Topic, b.Partition)
				if !s.owned[p] {
					s.t.Errorf("%s: a batch of %s, a partition it does not own (owns %v)", s.name, p, s.ownedLocked())
				}
				if len(b.Records) == 0 || b.NextOffset != b.Records[len(b.Records)-1].Offset+1 {
					s.t.Errorf("%s: a batch of %s with %d records and next_offset %d", s.name, p, len(b.Records), b.NextOffset)
				}
				s.batches = append(s.batches, b)
				for _, r := range b.Records {
					s.records[p] = append(s.records[p], consumedOf(b, r))
					s.recvAt[p] = append(s.recvAt[p], now)
					s.tokens[p] = append(s.tokens[p], fencingToken{int64(b.FencingEpoch), r.Offset})
				}
				a := &quirev1.AckedOffsets{Topic: b.Topic, Partition: b.Partition, NextOffset: b.NextOffset}
				if s.lagAck {
					a, s.unacked[p] = nil, a
				}
				if s.autoAck && a != nil {
					s.send <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{
						Partitions: []*quirev1.AckedOffsets{a}}}}
				}
			case *quirev1.SubscribeResponse_AckRefused:
				s.refused = append(s.refused, ev.AckRefused)
			case *quirev1.SubscribeResponse_RawBatch:
				b := ev.RawBatch
				p := tpName(b.Topic, b.Partition)
				if !s.owned[p] {
					s.t.Errorf("%s: raw batches of %s, a partition it does not own (owns %v)", s.name, p, s.ownedLocked())
				}
				if prev, ok := s.rawNext[p]; ok && b.StartOffset < prev {
					s.t.Errorf("%s: raw batches of %s from %d, before the previous ones' next_offset %d", s.name, p, b.StartOffset, prev)
				}
				s.rawNext[p] = b.NextOffset
				s.raws = append(s.raws, b)
				recs, last, err := decodeRaw(b)
				if err != nil || last != b.NextOffset {
					s.t.Errorf("%s: raw batches of %s: %v; last batch ends at %d, next_offset %d", s.name, p, err, last, b.NextOffset)
				}
				for _, r := range recs {
					s.records[p] = append(s.records[p], r)
					s.recvAt[p] = append(s.recvAt[p], now)
					s.tokens[p] = append(s.tokens[p], fencingToken{int64(b.FencingEpoch), r.Offset})
				}
				if s.autoAck {
					s.send <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{
						Partitions: []*quirev1.AckedOffsets{{Topic: b.Topic, Partition: b.Partition, NextOffset: b.NextOffset}}}}}
				}
			}
			s.signalLocked()
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-s.done
		s.mu.Lock()
		if s.send != nil {
			close(s.send)
			s.send = nil
		}
		s.mu.Unlock()
		<-sendDone
	})
	return s
}

// consumedOf is a batch's record as a ConsumedRecord.
// decodeRaw decodes a SubscribeRawBatch as a Kafka client would: control
// batches and records below start_offset skipped. last is the offset
// after the last batch.
func decodeRaw(b *quirev1.SubscribeRawBatch) (recs []*quirev1.ConsumedRecord, last int64, err error) {
	last = -1
	err = record.SplitBatches(b.Records, func(batch []byte, h record.Header) error {
		last = h.NextOffset()
		if h.Control() {
			return nil
		}
		return record.ForEachRecord(batch, func(r *record.Record) error {
			if r.Offset >= b.StartOffset {
				recs = append(recs, &quirev1.ConsumedRecord{Topic: b.Topic, Partition: b.Partition, Offset: r.Offset,
					TimestampMs: r.Timestamp, LeaderEpoch: h.PartitionLeaderEpoch,
					ValueData: &quirev1.ConsumedRecord_Value{Value: string(r.Value)}})
			}
			return nil
		})
	})
	return recs, last, err
}

func consumedOf(b *quirev1.SubscribeBatch, r *quirev1.BatchRecord) *quirev1.ConsumedRecord {
	c := &quirev1.ConsumedRecord{Topic: b.Topic, Partition: b.Partition, Offset: r.Offset, TimestampMs: r.TimestampMs,
		LeaderEpoch: r.LeaderEpoch, Headers: r.Headers}
	switch k := r.KeyData.(type) {
	case *quirev1.BatchRecord_Key:
		c.KeyData = &quirev1.ConsumedRecord_Key{Key: k.Key}
	case *quirev1.BatchRecord_KeyBytes:
		c.KeyData = &quirev1.ConsumedRecord_KeyBytes{KeyBytes: k.KeyBytes}
	}
	switch v := r.ValueData.(type) {
	case *quirev1.BatchRecord_Value:
		c.ValueData = &quirev1.ConsumedRecord_Value{Value: v.Value}
	case *quirev1.BatchRecord_ValueBytes:
		c.ValueData = &quirev1.ConsumedRecord_ValueBytes{ValueBytes: v.ValueBytes}
	}
	return c
}

// ackBelow acknowledges every record of topic's partition p sent below next.
func (s *subStream) ackBelow(topic string, p int32, next int64) {
	s.send <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{
		Partitions: []*quirev1.AckedOffsets{{Topic: topic, Partition: p, NextOffset: next}}}}}
}

func (s *subStream) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *subStream) ownedLocked() []string {
	var out []string
	for p := range s.owned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// wait polls cond, under the stream's lock, after every event until it
// holds or ctx ends.
func (s *subStream) wait(ctx context.Context, what string, cond func() bool) {
	s.t.Helper()
	for {
		s.mu.Lock()
		ok, ch, err := cond(), s.changed, s.err
		s.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			s.t.Fatalf("%s: waiting for %s: the stream ended: %v", s.name, what, err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			s.t.Fatalf("%s: waiting for %s: %v", s.name, what, ctx.Err())
		}
	}
}

// refusedAck waits for the stream's n-th refused ack and returns it.
func (s *subStream) refusedAck(ctx context.Context, n int) *quirev1.SubscribeAckRefused {
	s.t.Helper()
	s.wait(ctx, fmt.Sprintf("ack refusal %d", n), func() bool { return len(s.refused) >= n })
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused[n-1]
}

// checkRefused fails unless r refuses an ack INVALID_REQUEST saying want.
func checkRefused(t *testing.T, r *quirev1.SubscribeAckRefused, want string) {
	t.Helper()
	if r.Error.GetCode() != quirev1.ErrorCode_INVALID_REQUEST || !strings.Contains(r.Error.GetMessage(), want) {
		t.Fatalf("ack refused with %v, want INVALID_REQUEST saying %q", r.Error, want)
	}
}

func (s *subStream) ack(topic string, p int32, offsets ...int64) {
	s.send <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{
		Partitions: []*quirev1.AckedOffsets{{Topic: topic, Partition: p, Offsets: offsets}}}}}
}

// closeSend half-closes the stream and waits for its end.
func (s *subStream) closeSend(ctx context.Context) error {
	s.send <- nil
	select {
	case <-s.done:
	case <-ctx.Done():
		s.t.Fatalf("%s: the stream did not end after CloseSend", s.name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *subStream) ownedNow() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownedLocked()
}

func (s *subStream) offsets(p string) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, r := range s.records[p] {
		out = append(out, r.Offset)
	}
	return out
}

func subCluster(t *testing.T, sessionMs int64) (*testcluster.Cluster, context.Context, int32) {
	c := testcluster.New(t, 3, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupConsumerSessionTimeoutMs = sessionMs
		cfg.GroupConsumerHeartbeatIntervalMs = 100
	}))
	ctx := subCtx(t)
	ctl := c.WaitController(ctx)
	return c, ctx, ctl
}

func waitTopic(ctx context.Context, c *testcluster.Cluster, name string) {
	c.WaitImage(ctx, func(img *metadata.Image) bool {
		_, ok := img.Topic(name)
		return ok && img.MetadataVersion() >= metadata.MetadataVersionProducerIDs
	})
}

func produceN(ctx context.Context, t *testing.T, c *testcluster.Cluster, topic string, parts int32, n int, tag string) {
	t.Helper()
	for p := range parts {
		req := &quirev1.ProduceRecordsRequest{Topic: topic, OptionalAcks: &quirev1.ProduceRecordsRequest_Acks{Acks: -1}, TimeoutMs: 5000}
		for i := range n {
			req.Records = append(req.Records, &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: fmt.Sprintf("%s-%d-%d", tag, p, i)},
				OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: p}})
		}
		c.Eventually(ctx, "produce", func() error {
			running := c.Running()
			resp, err := quirev1.NewProducerClient(c.Conn(running[int(p)%len(running)])).ProduceRecords(ctx, req)
			if err != nil {
				return err
			}
			for _, r := range resp.Results {
				if r.Error != nil {
					return fmt.Errorf("%s-%d: %s", topic, p, r.Error.Message)
				}
			}
			return nil
		})
	}
}

// committedAt is a group's committed offset of one partition.
func committedAt(ctx context.Context, c *testcluster.Cluster, via int32, group, topic string, p int32) (int64, error) {
	resp, err := groups(c, via).FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: group,
		Partitions: []*quirev1.TopicPartition{{Topic: topic, Partition: p}}})
	if err != nil {
		return -1, err
	}
	return resp.Offsets[0].Offset, nil
}

// subCtx is a longer testCtx: these tests take several rebalances.
func subCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkViews fails when two streams' timestamped views ever have one
// partition at the same moment.
func checkViews(t *testing.T, streams ...*subStream) {
	t.Helper()
	type span struct {
		stream   string
		from, to time.Time
	}
	spans := map[string][]span{}
	for _, s := range streams {
		s.mu.Lock()
		views := slices.Clone(s.views)
		s.mu.Unlock()
		for i, v := range views {
			to := time.Now().Add(time.Hour)
			if i+1 < len(views) {
				to = views[i+1].at
			}
			for _, p := range v.owned {
				spans[p] = append(spans[p], span{s.name, v.at, to})
			}
		}
	}
	for p, ss := range spans {
		for i := range ss {
			for j := i + 1; j < len(ss); j++ {
				a, b := ss[i], ss[j]
				if a.stream != b.stream && a.from.Before(b.to) && b.from.Before(a.to) {
					t.Errorf("partition %s owned by %s (%v to %v) and %s (%v to %v) at once", p, a.stream,
						a.from.Format("15:04:05.000"), a.to.Format("15:04:05.000"), b.stream, b.from.Format("15:04:05.000"), b.to.Format("15:04:05.000"))
				}
			}
		}
	}
}

// TestClusterSubscribeSplit: two Subscribe streams on different nodes
// split a 6-partition topic 3 and 3; the first, alone at first, reads
// and acknowledges everything, which is committed; on revocation it sends
// no more of the partitions it gave up, and the second reads them from
// exactly the first's acknowledged offsets; at no moment do both own a
// partition; the fencing tokens of a moved partition's records are all
// above the first's on the second; closing the first gives everything
// to the second at once, well within the session timeout.
func TestClusterSubscribeSplit(t *testing.T) {
	t.Parallel()
	// A session timeout far above the deadline on the hand-over below.
	c, ctx, ctl := subCluster(t, 300000)
	createTopic(t, c, ctl, "split", 6, 3)
	waitTopic(ctx, c, "split")
	produceN(ctx, t, c, "split", 6, 10, "a")

	start := func() *quirev1.SubscribeStart {
		return &quirev1.SubscribeStart{Group: "sg", Subscription: &quirev1.GroupSubscription{Topics: []string{"split"}},
			MaxOutstandingRecords: 4, CommitIntervalMs: 50, Assignor: "range"}
	}
	a := subscribe(t, c, c.IDs()[0], "A", start(), true)
	a.wait(ctx, "A reads all 60 records", func() bool {
		n := 0
		for _, rs := range a.records {
			n += len(rs)
		}
		return n == 60 && len(a.owned) == 6
	})
	for p := range int32(6) {
		if got := a.offsets(tpName("split", p)); !slices.Equal(got, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
			t.Fatalf("A read split-%d offsets %v", p, got)
		}
	}
	c.Eventually(ctx, "A's acknowledgements committed", func() error {
		for p := range int32(6) {
			if got, err := committedAt(ctx, c, ctl, "sg", "split", p); err != nil || got != 10 {
				return fmt.Errorf("split-%d committed at %d (%v)", p, got, err)
			}
		}
		return nil
	})

	b := subscribe(t, c, c.IDs()[1], "B", start(), true)
	b.wait(ctx, "B owns 3", func() bool { return len(b.owned) == 3 })
	a.wait(ctx, "A owns 3", func() bool { return len(a.owned) == 3 })
	revokedAt := map[string]int{} // records A had of each revoked partition
	for _, p := range b.ownedNow() {
		revokedAt[p] = len(a.offsets(p))
	}
	// range: one member (by id order) has split-0..2, the other 3..5.
	if got := append(a.ownedNow(), b.ownedNow()...); !slices.Equal(got, []string{"split-0", "split-1", "split-2", "split-3", "split-4", "split-5"}) &&
		!slices.Equal(got, []string{"split-3", "split-4", "split-5", "split-0", "split-1", "split-2"}) {
		t.Fatalf("A owns %v and B %v, want split-0..2 and 3..5", a.ownedNow(), b.ownedNow())
	}

	produceN(ctx, t, c, "split", 6, 10, "b")
	want := []int64{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	b.wait(ctx, "B reads the new records", func() bool {
		for p := range b.owned {
			if len(b.records[p]) < 10 {
				return false
			}
		}
		return true
	})
	a.wait(ctx, "A reads the new records", func() bool {
		for p := range a.owned {
			if len(a.records[p]) < 20 {
				return false
			}
		}
		return true
	})
	for _, p := range b.ownedNow() {
		if got := b.offsets(p); !slices.Equal(got, want) {
			t.Fatalf("B read %s offsets %v, want %v (from A's commit on)", p, got, want)
		}
		if got := len(a.offsets(p)); got != revokedAt[p] || got != 10 {
			t.Fatalf("A read %d records of %s, which it gave up after 10", got, p)
		}
	}
	for _, p := range a.ownedNow() {
		if got := a.offsets(p); len(got) != 20 || got[19] != 19 {
			t.Fatalf("A read %s offsets %v", p, got)
		}
	}
	checkViews(t, a, b)
	for _, p := range b.ownedNow() {
		checkFencing(t, p, a, b) // SubscribeRecords.fencing_epoch
	}

	// A closes: B owns all six at once.
	closed := time.Now()
	if err := a.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("A's stream ended with %v, want OK", err)
	}
	b.wait(ctx, "B owns 6", func() bool { return len(b.owned) == 6 })
	if took := time.Since(closed); took > time.Minute {
		t.Fatalf("B got A's partitions %v after A closed: not at once (the session timeout is 5 min)", took)
	}
	checkViews(t, a, b)
	if err := b.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("B's stream ended with %v, want OK", err)
	}
	for p := range int32(6) {
		if got := fetchOffset(ctx, t, c, ctl, "sg", "split", p); got != 20 {
			t.Fatalf("split-%d committed at %d after both closed, want 20", p, got)
		}
	}
}

// TestClusterSubscribeAcks: the credit caps what is sent and not
// acknowledged; the broker commits the offset below which everything was
// acknowledged (acks out of order hold it back); a clean close commits
// and leaves at once; an ack of a record never sent is refused
// INVALID_REQUEST on the stream, which goes on; a broken stream leaves
// the group.
func TestClusterSubscribeAcks(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := subCluster(t, 3000)
	createTopic(t, c, ctl, "acks", 1, 3)
	waitTopic(ctx, c, "acks")
	produceN(ctx, t, c, "acks", 1, 10, "r")
	const p0 = "acks-0"
	start := &quirev1.SubscribeStart{Group: "ag", Subscription: &quirev1.GroupSubscription{Regex: "ack.*"},
		MaxOutstandingRecords: 3, CommitIntervalMs: 50}
	via := c.IDs()[2]
	s := subscribe(t, c, via, "S", start, false)
	s.wait(ctx, "3 records", func() bool { return len(s.records[p0]) >= 3 })
	if got := s.offsets(p0); !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("read %v, want 0 1 2", got)
	}
	ackedAt := time.Now()
	s.ack("acks", 0, 2)
	s.wait(ctx, "a fourth record", func() bool { return len(s.records[p0]) >= 4 })
	s.mu.Lock()
	fourth, fourthAt := s.records[p0][3].Offset, s.recvAt[p0][3]
	s.mu.Unlock()
	if fourth != 3 || fourthAt.Before(ackedAt) {
		t.Fatalf("fourth record offset %d read at %v, before the ack at %v freed the credit", fourth, fourthAt, ackedAt)
	}
	// Nothing below offset 0 is unacknowledged: the commit point is 0.
	c.Eventually(ctx, "commit 0", func() error {
		if got, err := committedAt(ctx, c, ctl, "ag", "acks", 0); err != nil || got != 0 {
			return fmt.Errorf("committed %d (%v)", got, err)
		}
		return nil
	})
	s.ack("acks", 0, 1, 0)
	c.Eventually(ctx, "commit 3", func() error {
		if got, err := committedAt(ctx, c, ctl, "ag", "acks", 0); err != nil || got != 3 {
			return fmt.Errorf("committed %d (%v)", got, err)
		}
		return nil
	})
	s.wait(ctx, "6 records", func() bool { return len(s.records[p0]) >= 6 })
	s.ack("acks", 0, 3, 4)
	if err := s.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("closed stream ended with %v, want OK", err)
	}
	// Committed and left before the stream ended.
	if got := fetchOffset(ctx, t, c, ctl, "ag", "acks", 0); got != 5 {
		t.Fatalf("committed %d after the close, want 5", got)
	}
	d, err := groups(c, ctl).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "ag"})
	if err != nil || len(d.Members) != 0 {
		t.Fatalf("describe after a clean close: %v, %v; want no members", d, err)
	}

	// The next stream starts at the commit; acking what it was never
	// sent is refused, whole, and the stream goes on.
	s2 := subscribe(t, c, via, "S2", start, false)
	s2.wait(ctx, "records from 5", func() bool { return len(s2.records[p0]) >= 1 })
	if got := s2.offsets(p0)[0]; got != 5 {
		t.Fatalf("second stream starts at %d, want 5", got)
	}
	// The member the broker is for the stream shows the stream's host.
	if d, err := groups(c, ctl).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "ag"}); err != nil ||
		len(d.Members) != 1 || d.Members[0].ClientAddress != "127.0.0.1" {
		t.Fatalf("describe with the second stream in: %v, %v; want one member at 127.0.0.1", d, err)
	}
	s2.send <- &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{
		Partitions: []*quirev1.AckedOffsets{{Topic: "acks", Partition: 0, Offsets: []int64{5, 9}}}}}}
	s2.wait(ctx, "the ack refused", func() bool { return len(s2.refused) == 1 })
	s2.mu.Lock()
	ref := s2.refused[0]
	s2.mu.Unlock()
	if ref.Error.GetCode() != quirev1.ErrorCode_INVALID_REQUEST || !strings.Contains(ref.Error.GetMessage(), "offset 9, which this stream was not sent") ||
		len(ref.Ack.GetPartitions()) != 1 {
		t.Fatalf("ack of an offset never sent refused with %v", ref)
	}
	// The stream goes on: 5, in the refused ack, acknowledged on its own
	// is committed.
	s2.ack("acks", 0, 5)
	c.Eventually(ctx, "commit 6 after the ack refused", func() error {
		if got, err := committedAt(ctx, c, ctl, "ag", "acks", 0); err != nil || got != 6 {
			return fmt.Errorf("committed %d (%v)", got, err)
		}
		return nil
	})
	s2.cancel()
	<-s2.done

	// A broken stream leaves the group (TestClusterSubscribeBrokenLeaves
	// shows it is at once).
	s3 := subscribe(t, c, via, "S3", start, false)
	s3.wait(ctx, "joined", func() bool { return len(s3.owned) == 1 })
	s3.cancel()
	<-s3.done
	c.Eventually(ctx, "the broken stream's member removed", func() error {
		d, err := groups(c, ctl).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "ag"})
		if err != nil {
			return err
		}
		if len(d.Members) != 0 {
			return fmt.Errorf("%d members", len(d.Members))
		}
		return nil
	})
}

// TestClusterSubscribeBadInput: what is wrong with a stream's first
// message ends it with a clear status, before it joins anything.
func TestClusterSubscribeBadInput(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := subCluster(t, 3000)
	createTopic(t, c, ctl, "bad", 1, 3)
	waitTopic(ctx, c, "bad")
	sub := &quirev1.GroupSubscription{Topics: []string{"bad"}}
	cases := []struct {
		name  string
		first *quirev1.SubscribeRequest
		code  quirev1.ErrorCode
	}{
		{"ack first", &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Ack{Ack: &quirev1.SubscribeAck{}}}, quirev1.ErrorCode_INVALID_REQUEST},
		{"no subscription", &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{Group: "b"}}}, quirev1.ErrorCode_INVALID_REQUEST},
		{"bad regex", &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{Group: "b",
			Subscription: &quirev1.GroupSubscription{Regex: "("}}}}, quirev1.ErrorCode_INVALID_REGULAR_EXPRESSION},
		{"empty group", &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{Subscription: sub}}}, quirev1.ErrorCode_INVALID_GROUP_ID},
		{"unknown assignor", &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{Group: "b", Subscription: sub, Assignor: "nope"}}}, quirev1.ErrorCode_UNSUPPORTED_ASSIGNOR},
		{"unknown reset", &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{Group: "b", Subscription: sub, AutoOffsetReset: "none"}}}, quirev1.ErrorCode_INVALID_REQUEST},
		{"negative credit", &quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: &quirev1.SubscribeStart{Group: "b", Subscription: sub, MaxOutstandingRecords: -1}}}, quirev1.ErrorCode_INVALID_REQUEST},
	}
	for _, tc := range cases {
		stream, err := groups(c, c.IDs()[1]).Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(tc.first); err != nil {
			t.Fatalf("%s: send: %v", tc.name, err)
		}
		_, err = stream.Recv()
		if errCode(err) != tc.code || status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if _, err := groups(c, ctl).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "b"}); errCode(err) != quirev1.ErrorCode_GROUP_ID_NOT_FOUND {
		t.Fatalf("describe after refused streams: %v, want GROUP_ID_NOT_FOUND", err)
	}
}

// TestClusterSubscribeStatic: a Subscribe stream with an instance id
// (SubscribeStart.instance_id) closed by its client leaves its place to
// the instance's next stream, opened through another node, which takes
// its partitions with no rebalance: the group epoch stays and the other
// stream keeps its own. A third stream of the instance replaces the
// second, which ends with FENCED_INSTANCE_ID.
func TestClusterSubscribeStatic(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := subCluster(t, 20000)
	c.WaitMetadataVersion(ctx, metadata.MetadataVersionStaticMembers)
	createTopic(t, c, ctl, "st", 4, 3)
	waitTopic(ctx, c, "st")
	start := func(instance string) *quirev1.SubscribeStart {
		return &quirev1.SubscribeStart{Group: "static", Subscription: &quirev1.GroupSubscription{Topics: []string{"st"}},
			Assignor: "range", InstanceId: instance}
	}
	epoch := func() int32 {
		d, err := groups(c, ctl).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "static"})
		if err != nil {
			t.Fatal(err)
		}
		return d.GroupEpoch
	}
	ids := c.IDs()
	a := subscribe(t, c, ids[0], "A", start("pod-a"), true)
	b := subscribe(t, c, ids[1], "B", start(""), true)
	a.wait(ctx, "A owns 2", func() bool { return len(a.owned) == 2 })
	b.wait(ctx, "B owns 2", func() bool { return len(b.owned) == 2 })
	placeA, placeB, before := a.ownedNow(), b.ownedNow(), epoch()

	if err := a.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("A's close: %v", err)
	}
	a2 := subscribe(t, c, ids[2], "A2", start("pod-a"), true)
	a2.wait(ctx, "A2 owns A's partitions", func() bool { return slices.Equal(a2.ownedLocked(), placeA) })
	a2.mu.Lock()
	a2ID := a2.memberID
	a2.mu.Unlock()
	if got, now := b.ownedNow(), epoch(); !slices.Equal(got, placeB) || now != before {
		t.Fatalf("after A's restart: B owns %v at group epoch %d; before: %v at %d", got, now, placeB, before)
	}

	a3 := subscribe(t, c, ids[0], "A3", start("pod-a"), true)
	a3.wait(ctx, "A3 owns A's partitions", func() bool { return slices.Equal(a3.ownedLocked(), placeA) })
	select {
	case <-a2.done:
	case <-ctx.Done():
		t.Fatalf("A2's stream (member %s) did not end once A3 replaced it", a2ID)
	}
	if code := errCode(a2.err); code != quirev1.ErrorCode_FENCED_INSTANCE_ID {
		t.Fatalf("A2's stream ended with %v (%v), want FENCED_INSTANCE_ID", a2.err, code)
	}
	if got, now := b.ownedNow(), epoch(); !slices.Equal(got, placeB) || now != before {
		t.Fatalf("after A3 replaced A2: B owns %v at group epoch %d; before: %v at %d", got, now, placeB, before)
	}
	for _, s := range []*subStream{a3, b} {
		if err := s.closeSend(ctx); !errors.Is(err, io.EOF) {
			t.Fatalf("%s's close: %v", s.name, err)
		}
	}
}
