package subscribe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// The records side of a Subscribe stream without a stream: batches as
// the log holds them encoded within the credit, and acknowledgements.

// subTestBatch is a batch of n records at base, each value valueSize
// bytes ("base+i" then padding), written at leader epoch epoch.
func subTestBatch(base int64, n, valueSize int, epoch int32) []byte {
	bld := record.NewBuilder(record.None)
	for i := range n {
		v := []byte(fmt.Sprint(base + int64(i)))
		v = append(v, bytes.Repeat([]byte{'.'}, max(valueSize-len(v), 0))...)
		bld.Append(1700000000000+int64(i), nil, v, nil)
	}
	b := bld.Build()
	record.SetBaseOffset(b, base)
	record.SetPartitionLeaderEpoch(b, epoch)
	return b
}

// subTestControl is a control batch of one record at off.
func subTestControl(off int64) []byte {
	b := subTestBatch(off, 1, 0, 1)
	const offAttributes = 21
	binary.BigEndian.PutUint16(b[offAttributes:], record.AttrControl|record.AttrTransactional)
	return b
}

func newTestSubscription(batches bool, maxRecords, maxBytes int64) (*subscription, *subPart) {
	s := &subscription{start: &quirev1.SubscribeStart{Batches: batches, Format: quirev1.RecordFormat_RECORD_FORMAT_AUTO},
		maxRecords: maxRecords, maxBytes: maxBytes, owned: map[partKey]*subPart{}, everSent: map[partKey]int64{}}
	p := &subPart{tp: partKey{"orders", 2}, sentNext: 0, ackedEpoch: -1, committed: -1}
	s.owned[p.tp] = p
	return s, p
}

// decodeMsgs decodes encoded messages as a client would.
func decodeMsgs(t *testing.T, msgs []mem.BufferSlice) []*quirev1.SubscribeResponse {
	t.Helper()
	var out []*quirev1.SubscribeResponse
	for _, m := range msgs {
		var r quirev1.SubscribeResponse
		if err := proto.Unmarshal(m.Materialize(), &r); err != nil {
			t.Fatal(err)
		}
		m.Free()
		out = append(out, &r)
	}
	return out
}

// sendAll is encodePartition of p's position on the batches, decoded.
func sendAll(t *testing.T, s *subscription, p *subPart, batches ...[]byte) []*quirev1.SubscribeResponse {
	t.Helper()
	got, _ := sendRest(t, s, p, batches...)
	return got
}

// sendRest is sendAll, with what is left of the batches.
func sendRest(t *testing.T, s *subscription, p *subPart, batches ...[]byte) ([]*quirev1.SubscribeResponse, []byte) {
	t.Helper()
	msgs, rest, err := s.encodePartition(p, slices.Concat(batches...), nil)
	if err != nil {
		t.Fatal(err)
	}
	return decodeMsgs(t, msgs), rest
}

func batchOffsets(b *quirev1.SubscribeBatch) []int64 {
	var out []int64
	for _, r := range b.Records {
		out = append(out, r.Offset)
	}
	return out
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// ack takes an ack as the stream does: checked whole, then applied.
func ack(s *subscription, a ...*quirev1.AckedOffsets) error {
	m := &quirev1.SubscribeAck{Partitions: a}
	if err := s.checkAck(m); err != nil {
		return err
	}
	s.applyAck(m)
	return nil
}

// TestSubscribeEncodeBatch: the records at and after the position, past a
// control batch, come as one SubscribeBatch naming its partition once,
// next_offset the offset after its last record; the credit counts each
// record's encoded size; the position moves past everything read.
func TestSubscribeEncodeBatch(t *testing.T) {
	t.Parallel()
	s, p := newTestSubscription(true, 100, 1<<20)
	p.next, p.sentNext, p.state = 3, 3, partReady
	got := sendAll(t, s, p, subTestBatch(0, 10, 10, 4), subTestControl(10), subTestBatch(11, 10, 10, 5))
	if len(got) != 1 || got[0].GetBatch() == nil {
		t.Fatalf("got %v, want one batch", got)
	}
	b := got[0].GetBatch()
	if want := append(span(3, 10), span(11, 21)...); b.Topic != "orders" || b.Partition != 2 || !slices.Equal(batchOffsets(b), want) || b.NextOffset != 21 {
		t.Fatalf("batch %s-%d offsets %v next %d, want orders-2 %v next 21", b.Topic, b.Partition, batchOffsets(b), b.NextOffset, want)
	}
	var size int64
	for _, r := range b.Records {
		size += int64(proto.Size(r))
		wantEpoch := int32(4)
		if r.Offset > 10 {
			wantEpoch = 5
		}
		if r.LeaderEpoch != wantEpoch || !strings.HasPrefix(r.GetValue(), fmt.Sprint(r.Offset)) || r.KeyData != nil {
			t.Fatalf("record %v", r)
		}
	}
	if s.outRecords != 17 || s.outBytes != size || p.sent.len() != 17 || p.next != 21 || p.sentNext != 21 || s.everSent[p.tp] != 21 {
		t.Fatalf("out %d records %d bytes (want 17, %d), sent %d, next %d, sentNext %d, everSent %d",
			s.outRecords, s.outBytes, size, p.sent.len(), p.next, p.sentNext, s.everSent[p.tp])
	}
	if p.commitPoint() != 3 {
		t.Fatalf("commit point %d before any ack, want 3", p.commitPoint())
	}
	// A trailing control batch moves the position but nothing to acknowledge.
	if got := sendAll(t, s, p, subTestControl(21)); len(got) != 0 || p.next != 22 || p.sentNext != 21 {
		t.Fatalf("control batch: %v, next %d sentNext %d", got, p.next, p.sentNext)
	}
	if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: 21}); err != nil {
		t.Fatal(err)
	}
	if s.outRecords != 0 || s.outBytes != 0 || p.commitPoint() != 21 || p.ackedEpoch != 5 {
		t.Fatalf("after acking all: out %d/%d, commit point %d, epoch %d", s.outRecords, s.outBytes, p.commitPoint(), p.ackedEpoch)
	}
}

// TestSubscribeEncodeRecordsForm: without batches, the same records come
// as SubscribeRecords, each naming its topic and partition.
func TestSubscribeEncodeRecordsForm(t *testing.T) {
	t.Parallel()
	s, p := newTestSubscription(false, 100, 1<<20)
	p.state = partReady
	got := sendAll(t, s, p, subTestBatch(0, 3, 5, 1))
	if len(got) != 1 || got[0].GetRecords() == nil || len(got[0].GetRecords().Records) != 3 {
		t.Fatalf("got %v, want SubscribeRecords of 3", got)
	}
	for i, r := range got[0].GetRecords().Records {
		if r.Topic != "orders" || r.Partition != 2 || r.Offset != int64(i) || r.LeaderEpoch != 1 {
			t.Fatalf("record %d: %v", i, r)
		}
	}
}

// TestSubscribeEncodeCredit: a record is sent while fewer records and
// fewer bytes than the credit are outstanding; acks free it.
func TestSubscribeEncodeCredit(t *testing.T) {
	t.Parallel()
	batch := subTestBatch(0, 10, 10, 1)
	s, p := newTestSubscription(true, 4, 1<<20)
	p.state = partReady
	first, second := subTestBatch(0, 2, 10, 1), subTestBatch(2, 8, 10, 1)
	// What is left starts at the batch of the first record not sent.
	got, rest := sendRest(t, s, p, first, second)
	if len(got) != 1 || !slices.Equal(batchOffsets(got[0].GetBatch()), span(0, 4)) || got[0].GetBatch().NextOffset != 4 {
		t.Fatalf("credit 4: %v", got)
	}
	if p.next != 4 || !bytes.Equal(rest, second) {
		t.Fatalf("next %d after sending 0-3, want 4; left %d bytes, want the second batch's %d", p.next, len(rest), len(second))
	}
	if got, rest := sendRest(t, s, p, batch); len(got) != 0 || !bytes.Equal(rest, batch) {
		t.Fatalf("no credit left, yet sent %v (left %d bytes of %d)", got, len(rest), len(batch))
	}
	// 1 by offset: the commit point stays at 0; then everything below 2.
	if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, Offsets: []int64{1}}); err != nil {
		t.Fatal(err)
	}
	if s.outRecords != 3 || p.commitPoint() != 0 {
		t.Fatalf("out %d, commit point %d after acking 1", s.outRecords, p.commitPoint())
	}
	if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: 2}); err != nil {
		t.Fatal(err)
	}
	if s.outRecords != 2 || p.commitPoint() != 2 {
		t.Fatalf("out %d, commit point %d after acking below 2", s.outRecords, p.commitPoint())
	}
	// By offset, then below an offset already acked, then a late ack by
	// offset of a record acknowledged already: all count once.
	if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, Offsets: []int64{3}, NextOffset: 1}); err != nil {
		t.Fatal(err)
	}
	if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, Offsets: []int64{0, 1, 3}}); err != nil {
		t.Fatal(err)
	}
	if s.outRecords != 1 || p.commitPoint() != 2 {
		t.Fatalf("out %d, commit point %d after acking 3", s.outRecords, p.commitPoint())
	}
	if got, rest := sendRest(t, s, p, rest); len(got) != 1 || !slices.Equal(batchOffsets(got[0].GetBatch()), span(4, 7)) || !bytes.Equal(rest, second) {
		t.Fatalf("3 records of credit: %v", got)
	}
	if got, rest := sendRest(t, s, p, second); len(got) != 0 || rest == nil {
		t.Fatalf("no credit left, yet sent %v", got)
	}
	if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: 7}); err != nil {
		t.Fatal(err)
	}
	if got, rest := sendRest(t, s, p, second); len(got) != 1 || !slices.Equal(batchOffsets(got[0].GetBatch()), span(7, 10)) || rest != nil || p.next != 10 {
		t.Fatalf("the rest: %v, left %d bytes, next %d", got, len(rest), p.next)
	}

	// Bytes: one record at a time under a 1-byte credit.
	s, p = newTestSubscription(true, 100, 1)
	p.state = partReady
	for want := range int64(3) {
		got := sendAll(t, s, p, batch)
		if len(got) != 1 || !slices.Equal(batchOffsets(got[0].GetBatch()), []int64{want}) {
			t.Fatalf("byte credit 1, record %d: %v", want, got)
		}
		if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: want + 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSubscribeEncodeSplits: a partition's records past what one message
// holds (1 MiB) come in several batches, one after the other.
func TestSubscribeEncodeSplits(t *testing.T) {
	t.Parallel()
	s, p := newTestSubscription(true, 1000, 64<<20)
	p.state = partReady
	got := sendAll(t, s, p, subTestBatch(0, 5, 300<<10, 1), subTestBatch(5, 5, 300<<10, 1))
	if len(got) != 4 {
		t.Fatalf("%d messages for 10 records of 300 KiB, want 4 of at most 1 MiB", len(got))
	}
	next := int64(0)
	for i, m := range got {
		b := m.GetBatch()
		if len(b.Records) == 0 || b.Records[0].Offset != next || b.NextOffset != b.Records[len(b.Records)-1].Offset+1 {
			t.Fatalf("message %d: offsets %v next %d, following on from %d", i, batchOffsets(b), b.NextOffset, next)
		}
		if size := proto.Size(m); size > 1<<20 {
			t.Fatalf("message %d is %d bytes", i, size)
		}
		next = b.NextOffset
	}
	if next != 10 || s.outRecords != 10 {
		t.Fatalf("sent up to %d, %d outstanding", next, s.outRecords)
	}
}

// TestSubscribeAckRefused: acknowledging what the stream was not sent is
// the client's mistake, said plainly.
func TestSubscribeAckRefused(t *testing.T) {
	t.Parallel()
	s, p := newTestSubscription(true, 100, 1<<20)
	p.state = partReady
	sendAll(t, s, p, subTestBatch(0, 5, 1, 1))
	for _, tc := range []struct {
		a    *quirev1.AckedOffsets
		want string
	}{
		{&quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: 6}, "ack of orders-2 below next_offset 6, past 5, the offset after the last record this stream was sent of it"},
		{&quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: -1}, "negative"},
		{&quirev1.AckedOffsets{Topic: "orders", Partition: 1, NextOffset: 1}, "ack of orders-1 below next_offset 1, but this stream was sent no record of it"},
		{&quirev1.AckedOffsets{Topic: "orders", Partition: 2, Offsets: []int64{2, 5}}, "ack of orders-2 offset 5, which this stream was not sent"},
		{&quirev1.AckedOffsets{Topic: "orders", Partition: 2, Offsets: []int64{-1}}, "offset -1, which this stream was not sent"},
	} {
		err := ack(s, tc.a)
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ack %v: %v, want INVALID_REQUEST saying %q", tc.a, err, tc.want)
		}
	}
	// Nothing of a refused ack was taken.
	if s.outRecords != 5 || p.commitPoint() != 0 {
		t.Fatalf("after refused acks: %d outstanding, commit point %d", s.outRecords, p.commitPoint())
	}
	// A partition sent, then revoked: its acks are ignored.
	delete(s.owned, p.tp)
	if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: 5, Offsets: []int64{4}}); err != nil {
		t.Fatalf("ack of a partition revoked: %v", err)
	}
}

// TestSubscribeSentQueue: the queue of records sent reuses its array and
// finds records by offset after its front moved.
func TestSubscribeSentQueue(t *testing.T) {
	t.Parallel()
	var q sentQueue
	for round := range 3 {
		for i := range int64(10000) {
			q.push(sentRecord{offset: i * 2})
		}
		for q.len() > 3 {
			q.pop()
		}
		if r := q.find(19994); r == nil || r.offset != 19994 || q.find(19993) != nil || q.find(0) != nil {
			t.Fatalf("round %d: find after pops: %v", round, r)
		}
		for q.len() > 0 {
			q.pop()
		}
		if len(q.recs) != 0 || q.head != 0 || cap(q.recs) == 0 {
			t.Fatalf("round %d: emptied queue len %d head %d cap %d", round, len(q.recs), q.head, cap(q.recs))
		}
	}
}

// BenchmarkSubscribeEncode is a stream's cost per record between the read
// and gRPC: 100-byte records in batches of 1000, decoded and encoded as
// SubscribeBatch messages (the records form with -records), with the
// bookkeeping of what was sent and its acknowledgement.
//
//	go test ./broker/ -run '^$' -bench BenchmarkSubscribeEncode
func BenchmarkSubscribeEncode(b *testing.B) {
	for _, batches := range []bool{true, false} {
		name := "batches"
		if !batches {
			name = "records"
		}
		b.Run(name, func(b *testing.B) {
			var log []byte
			for i := range int64(10) {
				log = append(log, subTestBatch(i*1000, 1000, 100, 1)...)
			}
			s, p := newTestSubscription(batches, 1<<30, 1<<40)
			s.start.Format = quirev1.RecordFormat_RECORD_FORMAT_BYTES
			p.state = partReady
			b.SetBytes(int64(len(log)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				p.next, p.sentNext = 0, 0
				msgs, _, err := s.encodePartition(p, log, nil)
				if err != nil {
					b.Fatal(err)
				}
				for _, m := range msgs {
					m.Free()
				}
				if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: 10000}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10000), "ns/record")
		})
	}
}
