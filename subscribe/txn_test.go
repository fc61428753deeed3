package subscribe

import (
	"slices"
	"testing"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/storage"
)

// subTestTxnBatch is a transactional batch of n records at base by
// producer pid.
func subTestTxnBatch(base int64, n int, pid int64) []byte {
	bld := record.NewBuilder(record.None)
	bld.SetProducer(pid, 0, 0)
	bld.SetTransactional(true)
	for i := range n {
		bld.Append(1700000000000+int64(i), nil, []byte("v"), nil)
	}
	b := bld.Build()
	record.SetBaseOffset(b, base)
	return b
}

// subTestMarker is producer pid's commit or abort marker at off.
func subTestMarker(off, pid int64, commit bool) []byte {
	typ := record.ControlAbort
	if commit {
		typ = record.ControlCommit
	}
	b := record.BuildMarker(pid, 0, record.Marker{Type: typ}, 1700000000000)
	record.SetBaseOffset(b, off)
	return b
}

// subTestTxnLog is a log of two producers' transactions, interleaved:
// producer 7's aborted (2-3, 6; marker 7), producer 8's committed (4-5;
// marker 8), producer 7's next, committed (9; marker 10), records of no
// transaction at 0-1 and 11. Read committed, what an application sees is
// 0, 1, 4, 5, 9, 11.
func subTestTxnLog() ([]byte, []storage.AbortedTxn) {
	return slices.Concat(
		subTestBatch(0, 2, 1, 1),
		subTestTxnBatch(2, 2, 7),
		subTestTxnBatch(4, 2, 8),
		subTestTxnBatch(6, 1, 7),
		subTestMarker(7, 7, false),
		subTestMarker(8, 8, true),
		subTestTxnBatch(9, 1, 7),
		subTestMarker(10, 7, true),
		subTestBatch(11, 1, 1, 1),
	), []storage.AbortedTxn{{ProducerID: 7, FirstOffset: 2, LastOffset: 7}}
}

// TestSubscribeReadCommittedDropsAborted: a read_committed stream sends
// neither the aborted transaction's records nor any marker, across
// credit-sized pieces of one fetch (what a fetch read past the credit is
// sent later with the same fetch's aborted transactions); a
// read_uncommitted one sends the aborted records too, never a marker.
func TestSubscribeReadCommittedDropsAborted(t *testing.T) {
	t.Parallel()
	log, aborted := subTestTxnLog()
	for _, tc := range []struct {
		isolation request.Isolation
		want      []int64
	}{
		{request.ReadCommitted, []int64{0, 1, 4, 5, 9, 11}},
		{request.ReadUncommitted, []int64{0, 1, 2, 3, 4, 5, 6, 9, 11}},
	} {
		for _, credit := range []int64{1, 2, 100} {
			s, p := newTestSubscription(true, credit, 1<<20)
			s.isolation = tc.isolation
			p.next, p.state = 0, partReady
			if tc.isolation == request.ReadCommitted {
				p.aborted = request.NewAbortFilter(slices.Clone(aborted))
			}
			var got []int64
			rest := log
			for rest != nil {
				msgs, r, err := s.encodePartition(p, rest, nil)
				if err != nil {
					t.Fatal(err)
				}
				rest = r
				for _, m := range decodeMsgs(t, msgs) {
					b := m.GetBatch()
					got = append(got, batchOffsets(b)...)
					if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: b.NextOffset}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("isolation %d, credit %d: sent %v, want %v", tc.isolation, credit, got, tc.want)
			}
			if p.next != 12 || p.commitPoint() != 12 {
				t.Fatalf("isolation %d, credit %d: next %d, commit point %d; want 12, 12", tc.isolation, credit, p.next, p.commitPoint())
			}
		}
	}
}

// TestSubscribeRawReadCommitted: with raw_batches, a read_committed
// stream leaves out the aborted transaction's batches and the markers,
// the events after a gap starting past it; read_uncommitted sends every
// batch as stored.
func TestSubscribeRawReadCommitted(t *testing.T) {
	t.Parallel()
	log, aborted := subTestTxnLog()
	s, p := newRawSubscription(100, 1<<20)
	s.isolation = request.ReadCommitted
	p.next, p.sentNext, p.state = 0, 0, partReady
	p.aborted = request.NewAbortFilter(aborted)
	events, rest := sendRaw(t, s, p, log)
	if rest != nil {
		t.Fatalf("rest %d bytes, want none", len(rest))
	}
	var got []int64
	for _, e := range events {
		if err := record.WalkRead(e.Records, func(batch []byte, h record.Header) error {
			if h.Control() {
				t.Fatalf("event from %d holds a control batch at %d", e.StartOffset, h.BaseOffset)
			}
			return record.ForEachRecord(batch, func(r *record.Record) error {
				if r.Offset >= e.StartOffset {
					got = append(got, r.Offset)
				}
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []int64{0, 1, 4, 5, 9, 11}; !slices.Equal(got, want) {
		t.Fatalf("read_committed raw events hold %v, want %v", got, want)
	}
	if p.next != 12 {
		t.Fatalf("next %d, want 12", p.next)
	}

	s, p = newRawSubscription(100, 1<<20)
	s.isolation = request.ReadUncommitted
	p.next, p.sentNext, p.state = 0, 0, partReady
	events, _ = sendRaw(t, s, p, log)
	if len(events) != 1 || !slices.Equal(events[0].Records, log) {
		t.Fatalf("read_uncommitted raw: %d events, want 1 holding the log as stored", len(events))
	}
}
