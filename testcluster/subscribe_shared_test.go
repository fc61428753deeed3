package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/broker"
	"github.com/quirelog/quire/testcluster"
)

// sharedStream is a test client of one SHARED Subscribe stream: a reader
// goroutine keeps the batches and ack answers as they come.
type sharedStream struct {
	t      *testing.T
	name   string
	cancel context.CancelFunc
	stream quirev1.Groups_SubscribeClient
	done   chan struct{}

	mu      sync.Mutex
	batches []*quirev1.SubscribeBatch
	answers map[int64]*quirev1.ShareAckResults
	member  string
	err     error
	changed chan struct{}
	nextID  int64
}

func shareSubscribe(ctx context.Context, t *testing.T, c *testcluster.Cluster, via int32, name string, start *quirev1.SubscribeStart) *sharedStream {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	stream, err := groups(c, via).Subscribe(sctx)
	if err != nil {
		cancel()
		t.Fatalf("%s: subscribe: %v", name, err)
	}
	s := &sharedStream{t: t, name: name, cancel: cancel, stream: stream, done: make(chan struct{}),
		answers: map[int64]*quirev1.ShareAckResults{}, changed: make(chan struct{})}
	t.Cleanup(func() { cancel(); <-s.done })
	if err := stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: start}}); err != nil {
		t.Fatalf("%s: send start: %v", name, err)
	}
	go func() {
		defer close(s.done)
		for {
			resp, err := stream.Recv()
			s.mu.Lock()
			switch {
			case err != nil:
				s.err = err
			case resp.GetBatch() != nil:
				s.batches = append(s.batches, resp.GetBatch())
			case resp.GetShareAckResults() != nil:
				s.answers[resp.GetShareAckResults().Id] = resp.GetShareAckResults()
			case resp.GetAssignment() != nil:
				s.member = resp.GetAssignment().MemberId
			}
			close(s.changed)
			s.changed = make(chan struct{})
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

// wait waits until cond holds, with s.mu held while it runs.
func (s *sharedStream) wait(ctx context.Context, what string, cond func() bool) {
	s.t.Helper()
	for {
		s.mu.Lock()
		ok, ch, err := cond(), s.changed, s.err
		s.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			s.t.Fatalf("%s: stream ended (%v) waiting for %s", s.name, err, what)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			s.t.Fatalf("%s: no %s before the deadline", s.name, what)
		}
	}
}

// records is every record received, in the order received.
func (s *sharedStream) records() []*quirev1.BatchRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*quirev1.BatchRecord
	for _, b := range s.batches {
		out = append(out, b.Records...)
	}
	return out
}

// ack sends ranges and waits for their answer.
func (s *sharedStream) ack(ctx context.Context, ranges ...*quirev1.ShareAckRange) *quirev1.ShareAckResults {
	s.t.Helper()
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	if err := s.stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_ShareAcks{ShareAcks: &quirev1.ShareAcks{Id: id, Ranges: ranges}}}); err != nil {
		s.t.Fatalf("%s: send acks: %v", s.name, err)
	}
	var out *quirev1.ShareAckResults
	s.wait(ctx, fmt.Sprintf("the answer to ack %d", id), func() bool { out = s.answers[id]; return out != nil })
	return out
}

func ackRange(topic string, first, last int64, typ quirev1.ShareAckType) *quirev1.ShareAckRange {
	return &quirev1.ShareAckRange{Topic: topic, Partition: 0, FirstOffset: first, LastOffset: last, Type: typ}
}

func shareCluster(t *testing.T) (*testcluster.Cluster, context.Context, int32) {
	c := testcluster.New(t, 1, testcluster.Config(func(_ int32, cfg *broker.Config) {
		cfg.GroupShareEnable = true
		cfg.ShareAutoOffsetReset = "earliest"
		cfg.GroupShareHeartbeatIntervalMs = 200
	}))
	ctx := subCtx(t)
	return c, ctx, c.WaitController(ctx)
}

// TestClusterSubscribeShared: three SHARED streams of one share group on
// a one-partition topic divide its records between them, each delivered
// once (delivery count 1) and accepted once; a malformed ack and an ack
// of a record the stream does not hold are refused with their own
// error codes while the stream goes on; a released record comes back
// with its delivery count raised; the records a broken stream held go to
// the others at once (not after their locks, 30 s); DescribeShareGroup
// shows the members and what is in flight.
func TestClusterSubscribeShared(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := shareCluster(t)
	createTopic(t, c, ctl, "st", 1, 1)
	waitTopic(ctx, c, "st")
	start := func() *quirev1.SubscribeStart {
		return &quirev1.SubscribeStart{Group: "sg", Subscription: &quirev1.GroupSubscription{Topics: []string{"st"}},
			Mode: quirev1.SubscribeMode_SHARED, MaxOutstandingRecords: 10}
	}
	streams := []*sharedStream{
		shareSubscribe(ctx, t, c, ctl, "A", start()),
		shareSubscribe(ctx, t, c, ctl, "B", start()),
		shareSubscribe(ctx, t, c, ctl, "C", start()),
	}
	const n = 60
	produceN(ctx, t, c, "st", 1, n, "r")

	// Each stream accepts what it gets, batch by batch, until all n are
	// accepted.
	accepted := map[int64]string{}
	acked := make([]int, len(streams)) // batches acknowledged, per stream
	for len(accepted) < n {
		progress := false
		for i, s := range streams {
			s.mu.Lock()
			var next *quirev1.SubscribeBatch
			if acked[i] < len(s.batches) {
				next = s.batches[acked[i]]
			}
			s.mu.Unlock()
			if next == nil {
				continue
			}
			acked[i]++
			progress = true
			var ranges []*quirev1.ShareAckRange
			for _, r := range next.Records {
				if r.DeliveryCount != 1 {
					t.Errorf("%s: record %d delivered with count %d, want 1", s.name, r.Offset, r.DeliveryCount)
				}
				if by, ok := accepted[r.Offset]; ok {
					t.Fatalf("record %d delivered to %s after %s accepted it", r.Offset, s.name, by)
				}
				accepted[r.Offset] = s.name
				ranges = append(ranges, ackRange("st", r.Offset, r.Offset, quirev1.ShareAckType_SHARE_ACCEPT))
			}
			if next.LockExpiresMs <= 0 {
				t.Errorf("%s: batch without lock_expires_ms", s.name)
			}
			for j, res := range s.ack(ctx, ranges...).Ranges {
				if res.Error != nil {
					t.Fatalf("%s: accept of %d refused: %v", s.name, ranges[j].FirstOffset, res.Error)
				}
			}
		}
		if !progress {
			c.Eventually(ctx, fmt.Sprintf("more records (%d of %d accepted)", len(accepted), n), func() error {
				for i, s := range streams {
					s.mu.Lock()
					more := acked[i] < len(s.batches)
					s.mu.Unlock()
					if more {
						return nil
					}
				}
				return errors.New("none yet")
			})
		}
	}
	for off := range int64(n) {
		if _, ok := accepted[off]; !ok {
			t.Errorf("record %d never delivered", off)
		}
	}

	// Refusals answer the range alone; the stream goes on.
	a := streams[0]
	res := a.ack(ctx, ackRange("st", 5, 5, quirev1.ShareAckType_SHARE_ACK_TYPE_UNSPECIFIED),
		ackRange("st", 7, 3, quirev1.ShareAckType_SHARE_ACCEPT),
		ackRange("st", 0, 0, quirev1.ShareAckType_SHARE_ACCEPT),
		&quirev1.ShareAckRange{Topic: "nope", FirstOffset: 0, LastOffset: 0, Type: quirev1.ShareAckType_SHARE_ACCEPT})
	wantCodes := []quirev1.ErrorCode{quirev1.ErrorCode_INVALID_REQUEST, quirev1.ErrorCode_INVALID_REQUEST,
		quirev1.ErrorCode_INVALID_RECORD_STATE, quirev1.ErrorCode_INVALID_REQUEST}
	for i, r := range res.Ranges {
		if r.Error.GetCode() != wantCodes[i] || r.Error.GetMessage() == "" {
			t.Errorf("bad ack %d answered %v, want %v with a message", i, r.Error, wantCodes[i])
		}
	}

	// Release: the record comes back (to any stream) with count 2.
	produceN(ctx, t, c, "st", 1, 1, "again") // offset n
	holder := delivered(ctx, c, streams, n, 1, nil)
	if r := holder.ack(ctx, ackRange("st", n, n, quirev1.ShareAckType_SHARE_RELEASE)).Ranges[0]; r.Error != nil {
		t.Fatalf("release refused: %v", r.Error)
	}
	again := delivered(ctx, c, streams, n, 2, nil)

	// Described: three members, the record in flight, held by again.
	d, err := groups(c, ctl).DescribeShareGroup(ctx, &quirev1.DescribeShareGroupRequest{Group: "sg"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Members) != 3 || len(d.Partitions) != 1 || d.Partitions[0].InFlight != 1 || d.Partitions[0].OldestLockOffset != n ||
		d.Partitions[0].OldestLockMember != again.memberID() {
		t.Errorf("described %v, want 3 members and record %d in flight to %s", d, n, again.name)
	}

	// A broken stream's records go to another stream at once.
	again.cancel()
	<-again.done
	delivered(ctx, c, streams, n, 3, again)

	// A stream closed cleanly ends OK and leaves.
	for _, s := range streams {
		if s == again {
			continue
		}
		if err := s.stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		<-s.done
		if !errors.Is(s.err, io.EOF) {
			t.Errorf("%s ended %v, want OK", s.name, s.err)
		}
	}
	c.Eventually(ctx, "no members left", func() error {
		d, err := groups(c, ctl).DescribeShareGroup(ctx, &quirev1.DescribeShareGroupRequest{Group: "sg"})
		if err != nil {
			return err
		}
		if len(d.Members) != 0 || d.Partitions[0].InFlight != 0 {
			return fmt.Errorf("described %v", d)
		}
		return nil
	})
}

// delivered waits until one of streams (not but) has received the record
// at off with delivery count count, and returns it.
func delivered(ctx context.Context, c *testcluster.Cluster, streams []*sharedStream, off int64, count int32, but *sharedStream) *sharedStream {
	var got *sharedStream
	c.Eventually(ctx, fmt.Sprintf("record %d delivered with count %d", off, count), func() error {
		for _, s := range streams {
			if s == but {
				continue
			}
			for _, r := range s.records() {
				if r.Offset == off && r.DeliveryCount == count {
					got = s
					return nil
				}
			}
		}
		return errors.New("not yet")
	})
	return got
}

func (s *sharedStream) memberID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.member
}

// TestClusterSubscribeSharedKeyOrdered: key_ordered turns on the group's
// per-key ordering when it has delivered nothing yet, and a stream asking
// for it in a group that delivers without it is refused INVALID_REQUEST.
func TestClusterSubscribeSharedKeyOrdered(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := shareCluster(t)
	createTopic(t, c, ctl, "kt", 1, 1)
	waitTopic(ctx, c, "kt")
	produceN(ctx, t, c, "kt", 1, 3, "k")
	st := func(group string, keyed bool) *quirev1.SubscribeStart {
		return &quirev1.SubscribeStart{Group: group, Subscription: &quirev1.GroupSubscription{Topics: []string{"kt"}},
			Mode: quirev1.SubscribeMode_SHARED, KeyOrdered: keyed}
	}
	k := shareSubscribe(ctx, t, c, ctl, "K", st("keyed", true))
	k.wait(ctx, "3 records", func() bool {
		n := 0
		for _, b := range k.batches {
			n += len(b.Records)
		}
		return n == 3
	})
	d, err := groups(c, ctl).DescribeShareGroup(ctx, &quirev1.DescribeShareGroupRequest{Group: "keyed"})
	if err != nil || !d.KeyOrdered {
		t.Fatalf("described %v, %v: want key_ordered", d, err)
	}

	u := shareSubscribe(ctx, t, c, ctl, "U", st("plain", false))
	u.wait(ctx, "3 records", func() bool {
		n := 0
		for _, b := range u.batches {
			n += len(b.Records)
		}
		return n == 3
	})
	late := shareSubscribe(ctx, t, c, ctl, "L", st("plain", true))
	<-late.done
	if code := errorDetail(late.err).GetCode(); code != quirev1.ErrorCode_INVALID_REQUEST {
		t.Errorf("key_ordered stream of a group delivering without it ended %v, want INVALID_REQUEST", late.err)
	}
}
