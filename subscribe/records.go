package subscribe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/mem"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/fetchbuf"
	"github.com/quirelog/quire/internal/wire"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/request"
)

// The records side of a Subscribe stream: one fetch in flight reads the
// ready partitions as stored (the core's Fetch with Route: here, or
// from their leaders; Read on each topic, as any fetch),
// and the stream's loop encodes the records its credit allows straight
// from those batches into the stream's messages (wire.RecordsEncoder: no
// message built per record), one or more per partition, then takes the
// client's acknowledgements. What a fetch read past the credit is held,
// from the batch of the first record not sent, and sent from as the
// acknowledgements free credit, before that partition is fetched again:
// a producer's batches hold thousands of records, more than a credit
// (500 by default), and reading one again for each credit's worth of its
// records would cost more than sending them. Every record sent is
// remembered, in offset order per partition, until it and all before it
// are acknowledged.

// subscribeHeldBytes caps what a stream holds of what it read past its
// credit (the read buffers, 1 MiB each, or the copies of leaders'
// answers): past it, the rest of a read is dropped, to be read again.
const subscribeHeldBytes = 4 << 20

// sentRecord is a record sent on the stream, or with raw_batches a
// record batch: offset is its first record sent and not acknowledged,
// end the offset after its last.
type sentRecord struct {
	offset int64
	end    int64
	size   int64 // its message's encoded size (a raw batch's bytes), as counted in the credit
	n      int32 // the records it counts in the credit: 1, or a raw batch's
	epoch  int32
	acked  bool
}

// sentQueue is a partition's records sent, in offset order, from the
// first one not acknowledged on (those after it may be acknowledged
// already, by offset). Its array is reused once it empties.
type sentQueue struct {
	recs []sentRecord
	head int
}

func (q *sentQueue) len() int { return len(q.recs) - q.head }

func (q *sentQueue) front() *sentRecord { return &q.recs[q.head] }

func (q *sentQueue) push(r sentRecord) { q.recs = append(q.recs, r) }

// pop drops the first record.
func (q *sentQueue) pop() {
	q.head++
	switch {
	case q.head == len(q.recs):
		q.recs, q.head = q.recs[:0], 0
	case q.head >= 4096 && q.head > len(q.recs)/2:
		n := copy(q.recs, q.recs[q.head:])
		q.recs, q.head = q.recs[:n], 0
	}
}

// find returns the record sent at off, nil when there is none.
func (q *sentQueue) find(off int64) *sentRecord {
	live := q.recs[q.head:]
	i, ok := slices.BinarySearchFunc(live, off, func(r sentRecord, o int64) int { return cmp.Compare(r.offset, o) })
	if !ok {
		return nil
	}
	return &live[i]
}

// commitPoint is the offset below which every record sent was
// acknowledged; -1 when the position is not known yet.
func (p *subPart) commitPoint() int64 {
	if p.sent.len() > 0 {
		return p.sent.front().offset
	}
	return p.sentNext
}

// maybeFetch starts a fetch of the ready partitions when none is in
// flight and the client has credit left.
func (s *subscription) maybeFetch(now time.Time) {
	if s.fetchStop != nil || s.outRecords >= s.maxRecords || s.outBytes >= s.maxBytes {
		return
	}
	keys := s.ownedKeys()
	var specs []request.FetchPartition
	// Round robin: a fetch fills partitions in order up to its bytes.
	s.rotate++
	for i := range keys {
		k := keys[(i+s.rotate)%len(keys)]
		if p := s.owned[k]; p.state == partReady && p.held == nil && !p.revoking() && !now.Before(p.retryAt) {
			specs = append(specs, request.FetchPartition{Topic: k.topic, Partition: k.part, Offset: p.next})
		}
	}
	if len(specs) == 0 {
		return
	}
	req := &request.FetchRequest{MaxWait: subscribeFetchWait, MaxBytes: s.fetchBytes(), Partitions: specs, Pooled: true, Route: true,
		Isolation: s.isolation}
	ctx, cancel := context.WithCancel(s.ctx)
	s.fetchStop = cancel
	go func() {
		results, err := s.core.Fetch(ctx, req)
		s.fetchDone <- fetchDone{results: results, err: err}
	}()
}

// fetchBytes is how much one fetch reads: what the byte credit left
// allows, at most subscribeFetchBytes.
func (s *subscription) fetchBytes() int {
	return int(max(min(s.maxBytes-s.outBytes, subscribeFetchBytes), 1))
}

// onFetch sends the records fetched of partitions still owned at the
// offsets they were fetched from, within the client's credit, and holds
// the rest.
func (s *subscription) onFetch(f fetchDone) error {
	s.fetchStop()
	s.fetchStop = nil
	if f.err != nil {
		// Refused whole: a topic the caller may no longer read.
		return errSubscribeEnd{err: f.err, leave: true}
	}
	now := time.Now()
	var msgs []mem.BufferSlice
	for i := range f.results {
		r := &f.results[i]
		p := s.owned[partKey{r.Topic, r.Partition}]
		if p == nil || p.state != partReady || p.next != r.Offset || p.held != nil || p.revoking() {
			continue // revoked, or moved, meanwhile
		}
		if r.Err != nil {
			if code := s.b.Error(r.Err).Code; code == quirev1.ErrorCode_OFFSET_OUT_OF_RANGE {
				s.b.Logger().Info("subscribe stream position out of range; resetting", "group", s.start.Group,
					"topic", r.Topic, "partition", r.Partition, "offset", p.next, "reset", s.start.AutoOffsetReset)
				p.state, p.next = partNeedReset, -1
			} else if s.ctx.Err() == nil {
				s.b.Logger().Debug("subscribe stream fetch failed", "group", s.start.Group,
					"topic", r.Topic, "partition", r.Partition, "error", r.Err)
				p.retryAt = now.Add(subscribeRetry)
			}
			continue
		}
		// Read_committed: the fetch stopped at the last stable offset,
		// and its aborted transactions are dropped; markers never go.
		p.aborted = request.NewAbortFilter(r.Aborted)
		var rest []byte
		var err error
		msgs, rest, err = s.encode(p, r.Records, msgs)
		if err != nil {
			s.undecodable(p, err, now)
			continue
		}
		if rest != nil {
			s.hold(p, rest, r)
		}
		if p.held == nil {
			p.aborted = nil
		}
	}
	// The records are copied out: the read buffers not held go back to
	// the pool before the next fetch, which reads while these are sent.
	request.Release(f.results)
	s.maybeFetch(now)
	return s.send(msgs)
}

func (s *subscription) send(msgs []mem.BufferSlice) error {
	for _, m := range msgs {
		if err := s.stream.SendMsg(&wire.Encoded{Data: m}); err != nil {
			return err
		}
	}
	return nil
}

// undecodable: our own log's batches do not decode. They are read again
// later rather than anything sent past them.
func (s *subscription) undecodable(p *subPart, err error, now time.Time) {
	s.b.Logger().Error("subscribe stream cannot decode fetched records", "group", s.start.Group,
		"topic", p.tp.topic, "partition", p.tp.part, "offset", p.next, "error", err)
	s.release(p)
	p.retryAt = now.Add(subscribeRetry)
}

// hold keeps rest, the part of r's batches from the first record not
// sent, to send from later, unless the stream holds too much already.
func (s *subscription) hold(p *subPart, rest []byte, r *request.FetchResult) {
	cost := int64(len(rest))
	if r.Buf != nil {
		cost = int64(cap(*r.Buf))
	}
	if s.heldBytes+cost > subscribeHeldBytes {
		return // read again next time
	}
	p.held, p.heldBuf, p.heldCost = rest, r.Buf, cost
	r.Buf = nil // p's now
	s.heldBytes += cost
}

// release drops what p holds.
func (s *subscription) release(p *subPart) {
	p.aborted = nil
	if p.held == nil {
		return
	}
	if p.heldBuf != nil {
		fetchbuf.Put(p.heldBuf)
	}
	s.heldBytes -= p.heldCost
	p.held, p.heldBuf, p.heldCost = nil, nil, 0
}

// sendHeld sends from what the partitions hold while the credit allows,
// starting with a different partition each time.
func (s *subscription) sendHeld() error {
	if s.heldBytes == 0 || s.outRecords >= s.maxRecords || s.outBytes >= s.maxBytes {
		return nil
	}
	keys := s.ownedKeys()
	s.rotateHeld++
	var msgs []mem.BufferSlice
	for i := range keys {
		p := s.owned[keys[(i+s.rotateHeld)%len(keys)]]
		if p.held == nil {
			continue
		}
		var rest []byte
		var err error
		msgs, rest, err = s.encode(p, p.held, msgs)
		switch {
		case err != nil:
			s.undecodable(p, err, time.Now())
		case rest == nil:
			s.release(p) // all sent: fetched next time
		default:
			p.held = rest
		}
		if s.outRecords >= s.maxRecords || s.outBytes >= s.maxBytes {
			break
		}
	}
	return s.send(msgs)
}

var errCreditFull = errors.New("credit full")

// filter is the abort filter of the batches being sent from: the one of
// the fetch they came from, or (none set) one dropping the markers only.
// It sees every batch of a fetch in offset order, those sent before
// included, so that a marker ends its producer's aborted transaction.
func (p *subPart) filter() *record.AbortFilter {
	if p.aborted == nil {
		p.aborted = record.NewAbortFilter(nil)
	}
	return p.aborted
}

// encode is encodePartition, or encodeRaw with raw_batches.
func (s *subscription) encode(p *subPart, batches []byte, msgs []mem.BufferSlice) ([]mem.BufferSlice, []byte, error) {
	if s.start.RawBatches {
		return s.encodeRaw(p, batches, msgs)
	}
	return s.encodePartition(p, batches, msgs)
}

// encodeRaw is encodePartition for raw_batches: it appends to msgs
// SubscribeRawBatch messages of p's batches from the one holding p.next
// on, whole, as many as the credit allows (a batch is sent while the
// outstanding records and bytes are under the limits), each message at
// most fetchbuf.Size of batches unless one batch is larger. A batch
// counts its bytes and its records at or after where it is sent from,
// from its header (no record decoded); a control batch counts none.
func (s *subscription) encodeRaw(p *subPart, batches []byte, msgs []mem.BufferSlice) (_ []mem.BufferSlice, rest []byte, _ error) {
	at := 0           // where in batches the batch being read starts
	from, to := -1, 0 // the batches of the message being built, batches[from:to]
	var startOff int64
	flush := func() {
		if from >= 0 {
			msgs = append(msgs, encodeRawBatch(p.tp, p.fencing, batches[from:to], startOff, p.sentNext))
			from = -1
		}
	}
	sentAny := false
	filter := p.filter()
	err := record.WalkRead(batches, func(batch []byte, h record.Header) error {
		next := p.next
		// Read_committed leaves out the batches of aborted transactions
		// and the markers: the message so far ends before them.
		skip := s.isolation == request.ReadCommitted && filter.Skip(&h)
		if h.NextOffset() <= next {
			at += len(batch) // wholly sent before
			return nil
		}
		if skip {
			flush()
			p.next = h.NextOffset()
			if p.sent.len() == 0 {
				p.sentNext = p.next // nothing to acknowledge of it
			}
			at += len(batch)
			return nil
		}
		if s.outRecords >= s.maxRecords || s.outBytes >= s.maxBytes {
			return errCreditFull
		}
		if from >= 0 && to-from+len(batch) > fetchbuf.Size {
			flush()
		}
		if from < 0 {
			from, startOff = at, next
		}
		var n int32
		if !h.Control() {
			n = h.NumRecords
			if h.BaseOffset < next { // the records below next were sent, or precede the position
				n = int32(min(int64(n), h.NextOffset()-next))
			}
		}
		size := int64(len(batch))
		p.sent.push(sentRecord{offset: max(next, h.BaseOffset), end: h.NextOffset(), size: size, n: n, epoch: h.PartitionLeaderEpoch})
		s.outRecords += int64(n)
		s.outBytes += size
		p.next, p.sentNext = h.NextOffset(), h.NextOffset()
		sentAny = true
		at += len(batch)
		to = at
		return nil
	})
	flush()
	if sentAny {
		s.everSent[p.tp] = p.sentNext
	}
	if errors.Is(err, errCreditFull) {
		return msgs, batches[at:], nil
	}
	return msgs, nil, err
}

// encodeRawBatch is the SubscribeResponse of a SubscribeRawBatch of
// batches, in a buffer from internal/fetchbuf.
func encodeRawBatch(tp partKey, fencing int32, batches []byte, start, next int64) mem.BufferSlice {
	r := wire.RawBatch{Topic: tp.topic, Partition: tp.part, Records: batches, StartOffset: start, NextOffset: next, FencingEpoch: fencing}
	buf := fetchbuf.Get(r.Size())
	*buf = r.Append(*buf)
	return mem.BufferSlice{mem.NewBuffer(buf, fetchbuf.Pool{})}
}

// encodePartition appends to msgs the messages of p's records in batches
// at or after p.next, as many as the credit allows, and moves p on past
// them. rest is what is left of batches, from the batch of the first
// record not sent; nil when everything was sent. On an error p is where
// the last record sent left it.
func (s *subscription) encodePartition(p *subPart, batches []byte, msgs []mem.BufferSlice) (_ []mem.BufferSlice, rest []byte, _ error) {
	var enc wire.RecordsEncoder
	var buf *[]byte
	// A message's records go in one buffer from internal/fetchbuf (1 MiB): a
	// partition with more read is sent in several messages, each well
	// under the 4 MiB a gRPC client takes by default (only a record
	// larger than the buffer makes one larger).
	start := func() {
		buf = fetchbuf.Get(fetchbuf.Size)
		enc.Reset(*buf, p.tp.topic, p.tp.part, s.start.Batches, s.start.Format == quirev1.RecordFormat_RECORD_FORMAT_AUTO)
		enc.SetFencingEpoch(p.fencing)
	}
	flush := func() {
		if enc.Records() > 0 {
			head, body := enc.Finish(p.sentNext)
			*buf = body
			msgs = append(msgs, mem.BufferSlice{mem.SliceBuffer(head), mem.NewBuffer(buf, fetchbuf.Pool{})})
		} else {
			fetchbuf.Put(buf)
		}
		buf = nil
	}
	start()
	var rec wire.Record
	var headers []wire.Header
	sentAny := false
	next := p.next // past the records sent and the batches skipped
	at := 0        // where in batches the batch being read starts
	filter := p.filter()
	err := record.WalkRead(batches, func(batch []byte, h record.Header) error {
		// Markers, and with read_committed the batches of aborted
		// transactions, are never records for the application.
		if filter.Skip(&h) || h.NextOffset() <= next {
			next = max(next, h.NextOffset())
			at += len(batch)
			return nil
		}
		err := record.ForEachRecord(batch, func(r *record.Record) error {
			if r.Offset < next {
				return nil
			}
			if s.outRecords >= s.maxRecords || s.outBytes >= s.maxBytes {
				return errCreditFull
			}
			need := len(r.Key) + len(r.Value) + 64
			headers = headers[:0]
			for _, hd := range r.Headers {
				headers = append(headers, wire.Header{Key: hd.Key, Value: hd.Value})
				need += len(hd.Key) + len(hd.Value) + 16
			}
			if enc.Records() > 0 && enc.Len()+need > cap(*buf) {
				flush()
				start()
			}
			rec = wire.Record{Offset: r.Offset, TimestampMs: r.Timestamp, LeaderEpoch: h.PartitionLeaderEpoch,
				Key: r.Key, Value: r.Value, Headers: headers}
			size := int64(enc.Append(&rec))
			p.sent.push(sentRecord{offset: r.Offset, end: r.Offset + 1, size: size, n: 1, epoch: h.PartitionLeaderEpoch})
			s.outRecords++
			s.outBytes += size
			next = r.Offset + 1
			p.next, p.sentNext = next, next
			sentAny = true
			return nil
		})
		if err == nil {
			at += len(batch)
		}
		return err
	})
	flush()
	if sentAny {
		s.everSent[p.tp] = p.sentNext
	}
	if errors.Is(err, errCreditFull) {
		return msgs, batches[at:], nil
	}
	if err != nil {
		return msgs, nil, err
	}
	// Every record read was sent: the next fetch starts past the last
	// batch read, and what lay between (control batches, records
	// compacted away) needs no acknowledgement.
	p.next = max(next, record.NextAfterRead(batches))
	if p.sent.len() == 0 {
		p.sentNext = max(p.sentNext, p.next)
	}
	return msgs, nil, nil
}

// onMessage takes a client message after the start: acknowledgements.
// An ack that does not fit what was sent is refused whole, on the stream
// (SubscribeAckRefused), which goes on; only a message that is not an
// ack ends it (the error returned).
func (s *subscription) onMessage(m *quirev1.SubscribeRequest) error {
	ack := m.GetAck()
	if ack == nil {
		return fmt.Errorf("%w: only the first message of a Subscribe stream is a start; later ones are acks", ErrInvalidRequest)
	}
	if err := s.checkAck(ack); err != nil {
		s.b.Logger().Debug("subscribe stream refused an ack", "group", s.start.Group, "member", s.memberID, "error", err)
		return s.stream.Send(&quirev1.SubscribeResponse{Event: &quirev1.SubscribeResponse_AckRefused{AckRefused: &quirev1.SubscribeAckRefused{
			Error: s.b.Error(err), Ack: ack}}})
	}
	s.applyAck(ack)
	return nil
}

// checkAck refuses an ack that does not fit what the stream sent.
func (s *subscription) checkAck(ack *quirev1.SubscribeAck) error {
	for _, a := range ack.Partitions {
		k := partKey{a.Topic, a.Partition}
		sent := s.everSent[k] // the offset after the last record ever sent, 0 for none
		if a.NextOffset < 0 {
			return fmt.Errorf("%w: ack of %s-%d below next_offset %d: negative", ErrInvalidRequest, a.Topic, a.Partition, a.NextOffset)
		}
		if a.NextOffset > sent {
			if sent == 0 {
				return fmt.Errorf("%w: ack of %s-%d below next_offset %d, but this stream was sent no record of it",
					ErrInvalidRequest, a.Topic, a.Partition, a.NextOffset)
			}
			return fmt.Errorf("%w: ack of %s-%d below next_offset %d, past %d, the offset after the last record this stream was sent of it",
				ErrInvalidRequest, a.Topic, a.Partition, a.NextOffset, sent)
		}
		if s.start.RawBatches && len(a.Offsets) > 0 {
			return fmt.Errorf("%w: ack of %s-%d by offsets, but a raw_batches stream is acknowledged by next_offset only",
				ErrInvalidRequest, a.Topic, a.Partition)
		}
		for _, off := range a.Offsets {
			if off < 0 || off >= sent {
				return fmt.Errorf("%w: ack of %s-%d offset %d, which this stream was not sent", ErrInvalidRequest, a.Topic, a.Partition, off)
			}
		}
	}
	return nil
}

// applyAck takes an ack checkAck let through.
func (s *subscription) applyAck(ack *quirev1.SubscribeAck) {
	for _, a := range ack.Partitions {
		p := s.owned[partKey{a.Topic, a.Partition}]
		if p == nil {
			continue // revoked meanwhile
		}
		for _, off := range a.Offsets {
			// Not found: acknowledged already, or sent before the
			// partition was last assigned (its commit point moved on
			// since).
			if r := p.sent.find(off); r != nil {
				s.acked(r)
			}
		}
		for p.sent.len() > 0 && (p.sent.front().end <= a.NextOffset || p.sent.front().acked) {
			r := p.sent.front()
			s.acked(r)
			p.ackedEpoch = r.epoch
			p.sent.pop()
		}
		// Into a raw batch: the commit point moves to next_offset; the
		// batch's credit is freed once it is acknowledged whole.
		if p.sent.len() > 0 && p.sent.front().offset < a.NextOffset {
			r := p.sent.front()
			r.offset, p.ackedEpoch = a.NextOffset, r.epoch
		}
	}
}

// acked marks r acknowledged, freeing its credit.
func (s *subscription) acked(r *sentRecord) {
	if !r.acked {
		r.acked = true
		s.outRecords -= int64(r.n)
		s.outBytes -= r.size
	}
}
