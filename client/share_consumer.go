package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// ShareConsumer is a member of a share group (Kafka's queues, KIP-932)
// over one Subscribe stream in SHARED mode: every member reads every
// partition of its topics, and the broker hands each record to one
// member at a time, locked to it until it is acknowledged or its lock
// runs out. Poll returns the records acquired; each is acknowledged with
// Accept, Release, Reject or Renew, which only note the acknowledgement:
// they are sent together, as ranges of offsets, by the next Poll, Flush or
// Close. Flush waits for the broker's answers. Closing the consumer (or
// losing its stream) makes the broker release every record it still
// holds at once.
//
// The consumer opens its stream on the leader of the first partition of
// its first topic; that node passes the fetches and acknowledgements of
// partitions led elsewhere on to their leaders (docs/share-groups.md).
//
// A ShareConsumer is safe for concurrent use; a ShareRecord's
// acknowledgements may be called from any goroutine.
type ShareConsumer struct {
	c      *Client
	group  string
	cancel context.CancelFunc
	stream quirev1.Groups_SubscribeClient

	sendMu sync.Mutex // one Send at a time

	mu       sync.Mutex
	ready    []*ShareRecord
	pending  []shareAck // noted, not sent
	nextID   int64
	waiting  map[int64]chan struct{} // acknowledgements sent and not answered
	refused  []error                 // since the last Flush
	memberID string
	err      error // how the stream ended
	changed  chan struct{}
	done     chan struct{}
}

// ShareRecord is a record acquired by a ShareConsumer.
type ShareRecord struct {
	Record
	// DeliveryCount is how many times the record has been acquired, this
	// time included.
	DeliveryCount int
	// LockExpires is when its lock runs out unless renewed (the
	// record is then delivered again, perhaps to another member).
	LockExpires time.Time

	sc *ShareConsumer
}

// ShareAckType is what becomes of an acknowledged record.
type ShareAckType int8

// The acknowledgement types (Kafka's numbers).
const (
	// ShareAccept: processed, never delivered again.
	ShareAccept ShareAckType = 1
	// ShareRelease: delivered again at once, to any member.
	ShareRelease ShareAckType = 2
	// ShareReject: unprocessable, never delivered again (written to the
	// group's dead-letter topic if it has one).
	ShareReject ShareAckType = 3
	// ShareRenew: still being processed; the lock starts over.
	ShareRenew ShareAckType = 4
)

// Accept notes that the record was processed.
func (r *ShareRecord) Accept() { r.sc.note(r, ShareAccept) }

// Release notes that the record is to be delivered again.
func (r *ShareRecord) Release() { r.sc.note(r, ShareRelease) }

// Reject notes that the record cannot be processed.
func (r *ShareRecord) Reject() { r.sc.note(r, ShareReject) }

// Renew notes that the record's lock is to start over.
func (r *ShareRecord) Renew() { r.sc.note(r, ShareRenew) }

type shareAck struct {
	topic     string
	partition int32
	offset    int64
	typ       ShareAckType
}

// ShareOpt configures a ShareConsumer.
type ShareOpt func(*quirev1.SubscribeStart)

// ShareKeyOrdered asks for the group's per-key ordering
// (share.key.ordering): the records of one key are delivered to one
// member at a time, in offset order. A group that delivers without it
// already refuses the consumer (INVALID_REQUEST).
func ShareKeyOrdered() ShareOpt {
	return func(st *quirev1.SubscribeStart) { st.KeyOrdered = true }
}

// ShareMaxRecords bounds the records the consumer holds at once (500
// unless set): the broker sends no more until some are acknowledged.
func ShareMaxRecords(n int) ShareOpt {
	return func(st *quirev1.SubscribeStart) { st.MaxOutstandingRecords = int32(n) }
}

// NewShareConsumer joins share group group, reading topics.
func (c *Client) NewShareConsumer(ctx context.Context, group string, topics []string, opts ...ShareOpt) (*ShareConsumer, error) {
	if len(topics) == 0 {
		return nil, newError(quirev1.ErrorCode_INVALID_REQUEST, "a share consumer needs at least one topic")
	}
	tm, err := c.meta.loadTopic(ctx, topics[0], false)
	if err != nil {
		return nil, err
	}
	b, ok := c.meta.broker(tm.partitions[0].leader)
	if !ok {
		return nil, newError(quirev1.ErrorCode_LEADER_NOT_AVAILABLE, fmt.Sprintf("no leader known for %s-0", topics[0]))
	}
	cc, err := c.conn(b.addr)
	if err != nil {
		return nil, err
	}
	start := &quirev1.SubscribeStart{Group: group, Subscription: &quirev1.GroupSubscription{Topics: slices.Clone(topics)},
		Mode: quirev1.SubscribeMode_SHARED, Format: quirev1.RecordFormat_RECORD_FORMAT_BYTES}
	for _, o := range opts {
		o(start)
	}
	sctx, cancel := context.WithCancel(c.ctx)
	stream, err := quirev1.NewGroupsClient(cc).Subscribe(sctx)
	if err != nil {
		cancel()
		return nil, fromStatus(err)
	}
	if err := stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_Start{Start: start}}); err != nil {
		cancel()
		return nil, fromStatus(err)
	}
	sc := &ShareConsumer{c: c, group: group, cancel: cancel, stream: stream, waiting: map[int64]chan struct{}{},
		changed: make(chan struct{}), done: make(chan struct{})}
	go sc.recv()
	// The first answer is the assignment, or the refusal.
	sc.mu.Lock()
	for sc.memberID == "" && sc.err == nil {
		ch := sc.changed
		sc.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			cancel()
			<-sc.done
			return nil, ctx.Err()
		}
		sc.mu.Lock()
	}
	err = sc.err
	sc.mu.Unlock()
	if err != nil {
		cancel()
		<-sc.done
		return nil, err
	}
	return sc, nil
}

// MemberID is the member the broker is on the consumer's behalf.
func (sc *ShareConsumer) MemberID() string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.memberID
}

func (sc *ShareConsumer) recv() {
	defer close(sc.done)
	for {
		resp, err := sc.stream.Recv()
		sc.mu.Lock()
		switch {
		case errors.Is(err, io.EOF):
			sc.err = ErrClosed
		case err != nil:
			sc.err = fromStatus(err)
		case resp.GetAssignment() != nil:
			sc.memberID = resp.GetAssignment().MemberId
		case resp.GetBatch() != nil:
			sc.onBatch(resp.GetBatch())
		case resp.GetShareAckResults() != nil:
			sc.onAckResults(resp.GetShareAckResults())
		}
		if err != nil {
			for id, ch := range sc.waiting {
				close(ch)
				delete(sc.waiting, id)
			}
		}
		close(sc.changed)
		sc.changed = make(chan struct{})
		sc.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (sc *ShareConsumer) onBatch(b *quirev1.SubscribeBatch) {
	expires := time.UnixMilli(b.LockExpiresMs)
	for _, r := range b.Records {
		rec := &ShareRecord{Record: Record{Topic: b.Topic, Partition: b.Partition, Offset: r.Offset,
			Timestamp: time.UnixMilli(r.TimestampMs), LeaderEpoch: r.LeaderEpoch},
			DeliveryCount: int(r.DeliveryCount), LockExpires: expires, sc: sc}
		switch k := r.KeyData.(type) {
		case *quirev1.BatchRecord_KeyBytes:
			rec.Key = k.KeyBytes
		case *quirev1.BatchRecord_Key:
			rec.Key = []byte(k.Key)
		}
		switch v := r.ValueData.(type) {
		case *quirev1.BatchRecord_ValueBytes:
			rec.Value = v.ValueBytes
		case *quirev1.BatchRecord_Value:
			rec.Value = []byte(v.Value)
		}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, RecordHeader{Key: h.Key, Value: h.Value})
		}
		sc.ready = append(sc.ready, rec)
	}
}

func (sc *ShareConsumer) onAckResults(res *quirev1.ShareAckResults) {
	for _, r := range res.Ranges {
		if r.Error != nil {
			rg := r.Range
			sc.refused = append(sc.refused, fmt.Errorf("client: %s of %s-%d offsets %d to %d: %w",
				rg.GetType(), rg.GetTopic(), rg.GetPartition(), rg.GetFirstOffset(), rg.GetLastOffset(), fromProto(r.Error)))
		}
	}
	if ch, ok := sc.waiting[res.Id]; ok {
		close(ch)
		delete(sc.waiting, res.Id)
	}
}

func (sc *ShareConsumer) note(r *ShareRecord, t ShareAckType) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.pending = append(sc.pending, shareAck{r.Topic, r.Partition, r.Offset, t})
}

// ackRanges turns acknowledgements into ranges: per partition, runs of
// consecutive offsets of one type. A record acknowledged twice keeps its
// last acknowledgement.
func ackRanges(acks []shareAck) []*quirev1.ShareAckRange {
	slices.SortStableFunc(acks, func(a, b shareAck) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
	})
	var out []*quirev1.ShareAckRange
	for i, a := range acks {
		if i+1 < len(acks) && acks[i+1].topic == a.topic && acks[i+1].partition == a.partition && acks[i+1].offset == a.offset {
			continue // a later acknowledgement of the same record wins
		}
		if n := len(out); n > 0 {
			last := out[n-1]
			if last.Topic == a.topic && last.Partition == a.partition && last.LastOffset+1 == a.offset && last.Type == quirev1.ShareAckType(a.typ) {
				last.LastOffset = a.offset
				continue
			}
		}
		out = append(out, &quirev1.ShareAckRange{Topic: a.topic, Partition: a.partition, FirstOffset: a.offset, LastOffset: a.offset,
			Type: quirev1.ShareAckType(a.typ)})
	}
	return out
}

// sendPending sends the acknowledgements noted and returns a channel
// closed once they are answered (nil when there were none).
func (sc *ShareConsumer) sendPending() (<-chan struct{}, error) {
	sc.sendMu.Lock()
	defer sc.sendMu.Unlock()
	sc.mu.Lock()
	if sc.err != nil {
		err := sc.err
		sc.mu.Unlock()
		return nil, err
	}
	if len(sc.pending) == 0 {
		sc.mu.Unlock()
		return nil, nil
	}
	ranges := ackRanges(sc.pending)
	sc.pending = nil
	sc.nextID++
	id := sc.nextID
	ch := make(chan struct{})
	sc.waiting[id] = ch
	sc.mu.Unlock()
	err := sc.stream.Send(&quirev1.SubscribeRequest{Request: &quirev1.SubscribeRequest_ShareAcks{ShareAcks: &quirev1.ShareAcks{Id: id, Ranges: ranges}}})
	if err != nil {
		<-sc.done // the stream ended: recv has its status
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return nil, sc.err
	}
	return ch, nil
}

// Poll sends the acknowledgements noted so far, then returns the records
// acquired since the last Poll, waiting until there is at least one or
// ctx ends (then it returns ctx's error). An error of the stream ends the
// consumer: every later call returns it.
func (sc *ShareConsumer) Poll(ctx context.Context) ([]*ShareRecord, error) {
	if _, err := sc.sendPending(); err != nil {
		return nil, err
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for len(sc.ready) == 0 {
		if sc.err != nil {
			return nil, sc.err
		}
		ch := sc.changed
		sc.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			sc.mu.Lock()
			return nil, ctx.Err()
		}
		sc.mu.Lock()
	}
	out := sc.ready
	sc.ready = nil
	return out, nil
}

// Flush sends the acknowledgements noted so far and waits for the
// answers to every acknowledgement sent; it returns the refusals since
// the last Flush (each saying its range and why), joined.
func (sc *ShareConsumer) Flush(ctx context.Context) error {
	if _, err := sc.sendPending(); err != nil {
		return err
	}
	sc.mu.Lock()
	chans := make([]chan struct{}, 0, len(sc.waiting))
	for _, ch := range sc.waiting {
		chans = append(chans, ch)
	}
	sc.mu.Unlock()
	for _, ch := range chans {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	err := errors.Join(sc.refused...)
	sc.refused = nil
	if err == nil && sc.err != nil && len(chans) > 0 {
		return sc.err
	}
	return err
}

// Close flushes the acknowledgements and ends the stream: the member
// leaves its group, and the records it still holds are released at once.
// It returns Flush's error.
func (sc *ShareConsumer) Close(ctx context.Context) error {
	err := sc.Flush(ctx)
	sc.sendMu.Lock()
	_ = sc.stream.CloseSend()
	sc.sendMu.Unlock()
	select {
	case <-sc.done:
	case <-ctx.Done():
	}
	sc.cancel()
	<-sc.done
	return err
}
