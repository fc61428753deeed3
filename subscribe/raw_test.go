package subscribe

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

func newRawSubscription(maxRecords, maxBytes int64) (*subscription, *subPart) {
	s, p := newTestSubscription(false, maxRecords, maxBytes)
	s.start.RawBatches = true
	return s, p
}

// sendRaw is encodeRaw of p's position on the batches, decoded.
func sendRaw(t *testing.T, s *subscription, p *subPart, batches ...[]byte) ([]*quirev1.SubscribeRawBatch, []byte) {
	t.Helper()
	msgs, rest, err := s.encodeRaw(p, slices.Concat(batches...), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []*quirev1.SubscribeRawBatch
	for _, r := range decodeMsgs(t, msgs) {
		if r.GetRawBatch() == nil {
			t.Fatalf("got %v, want a raw batch", r)
		}
		out = append(out, r.GetRawBatch())
	}
	return out, rest
}

// TestSubscribeEncodeRaw: from a position inside a stored batch, the
// batches holding the position and after it go out as stored, control
// batch included, the first from its base offset below start_offset (a
// batch wholly below the position is left out); next_offset is the
// offset after the last; the bytes are what proto.Marshal makes of the
// same event; the credit counts each batch's bytes and its records at or
// past the position (none for the control batch).
func TestSubscribeEncodeRaw(t *testing.T) {
	t.Parallel()
	s, p := newRawSubscription(100, 1<<20)
	p.next, p.sentNext, p.state = 13, 13, partReady
	below, b1, ctl, b2 := subTestBatch(0, 10, 10, 3), subTestBatch(10, 10, 10, 4), subTestControl(20), subTestBatch(21, 10, 10, 5)
	msgs, rest, err := s.encodeRaw(p, slices.Concat(below, b1, ctl, b2), nil)
	if err != nil || rest != nil || len(msgs) != 1 {
		t.Fatalf("encodeRaw: %d messages, rest %d bytes, %v; want 1, nil", len(msgs), len(rest), err)
	}
	raw := msgs[0].Materialize()
	got := decodeMsgs(t, msgs)[0].GetRawBatch()
	want := &quirev1.SubscribeRawBatch{Topic: "orders", Partition: 2, Records: slices.Concat(b1, ctl, b2), StartOffset: 13, NextOffset: 31}
	if !proto.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if m, _ := proto.Marshal(&quirev1.SubscribeResponse{Event: &quirev1.SubscribeResponse_RawBatch{RawBatch: want}}); !bytes.Equal(raw, m) {
		t.Fatalf("encoded %x, proto.Marshal %x", raw, m)
	}
	if wantBytes := int64(len(b1) + len(ctl) + len(b2)); s.outRecords != 7+10 || s.outBytes != wantBytes {
		t.Fatalf("credit taken: %d records %d bytes, want 17 and %d", s.outRecords, s.outBytes, wantBytes)
	}
	if p.next != 31 || p.sentNext != 31 || s.everSent[p.tp] != 31 || p.commitPoint() != 13 {
		t.Fatalf("next %d sentNext %d everSent %d commit point %d, want 31 31 31 13", p.next, p.sentNext, s.everSent[p.tp], p.commitPoint())
	}

	// Into the first batch: the commit point moves, no credit is freed.
	if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: 15}); err != nil {
		t.Fatal(err)
	}
	if p.commitPoint() != 15 || s.outRecords != 17 || p.ackedEpoch != 4 {
		t.Fatalf("after an ack of 15: commit point %d, %d records outstanding, epoch %d; want 15, 17, 4", p.commitPoint(), s.outRecords, p.ackedEpoch)
	}
	// Past the first batch and the control batch, into the last: those
	// two are freed.
	if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: 22}); err != nil {
		t.Fatal(err)
	}
	if p.commitPoint() != 22 || s.outRecords != 10 || s.outBytes != int64(len(b2)) {
		t.Fatalf("after an ack of 22: commit point %d, %d records %d bytes outstanding; want 22, 10, %d", p.commitPoint(), s.outRecords, s.outBytes, len(b2))
	}
	if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: 31}); err != nil {
		t.Fatal(err)
	}
	if p.commitPoint() != 31 || s.outRecords != 0 || s.outBytes != 0 {
		t.Fatalf("after an ack of 31: commit point %d, %d records %d bytes outstanding; want 31, 0, 0", p.commitPoint(), s.outRecords, s.outBytes)
	}
}

// TestSubscribeEncodeRawCredit: a batch is sent whole while the credit
// is not used up (10 records against a credit of 4), then nothing until
// an ack; what is left starts at the first batch not sent; a message
// holds at most fetchbuf.Size of batches.
func TestSubscribeEncodeRawCredit(t *testing.T) {
	t.Parallel()
	s, p := newRawSubscription(4, 1<<30)
	p.next, p.sentNext, p.state = 0, 0, partReady
	b0, b1 := subTestBatch(0, 10, 10, 1), subTestBatch(10, 10, 10, 1)
	got, rest := sendRaw(t, s, p, b0, b1)
	if len(got) != 1 || !bytes.Equal(got[0].Records, b0) || got[0].NextOffset != 10 || !bytes.Equal(rest, b1) {
		t.Fatalf("got %d events (next %v), rest %d bytes; want b0 alone and b1 left", len(got), got, len(rest))
	}
	if got, rest := sendRaw(t, s, p, rest); len(got) != 0 || !bytes.Equal(rest, b1) {
		t.Fatalf("credit used up: got %d events, rest %d bytes; want none, b1", len(got), len(rest))
	}
	if err := ack(s, &quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: 10}); err != nil {
		t.Fatal(err)
	}
	if got, rest := sendRaw(t, s, p, rest); len(got) != 1 || got[0].StartOffset != 10 || got[0].NextOffset != 20 || rest != nil {
		t.Fatalf("after the ack: got %v, rest %d bytes; want b1", got, len(rest))
	}

	// Three batches of ~400 KiB: two fit in one message, the third goes
	// in a second.
	s, p = newRawSubscription(1<<20, 1<<30)
	p.next, p.sentNext, p.state = 0, 0, partReady
	var big [][]byte
	for i := range int64(3) {
		big = append(big, subTestBatch(i*100, 100, 4000, 1))
	}
	got, rest = sendRaw(t, s, p, big...)
	if len(got) != 2 || rest != nil || !bytes.Equal(got[0].Records, slices.Concat(big[0], big[1])) || !bytes.Equal(got[1].Records, big[2]) ||
		got[0].NextOffset != 200 || got[1].StartOffset != 200 || got[1].NextOffset != 300 {
		t.Fatalf("3 batches of %d bytes: %d events, rest %d", len(big[0]), len(got), len(rest))
	}
}

// TestSubscribeRawAckRefused: a raw stream takes next_offset only, and
// not past what was sent.
func TestSubscribeRawAckRefused(t *testing.T) {
	t.Parallel()
	s, p := newRawSubscription(100, 1<<20)
	p.next, p.sentNext, p.state = 0, 0, partReady
	sendRaw(t, s, p, subTestBatch(0, 5, 10, 1))
	for _, c := range []struct {
		a    *quirev1.AckedOffsets
		want string
	}{
		{&quirev1.AckedOffsets{Topic: "orders", Partition: 2, Offsets: []int64{1}}, "ack of orders-2 by offsets, but a raw_batches stream is acknowledged by next_offset only"},
		{&quirev1.AckedOffsets{Topic: "orders", Partition: 2, NextOffset: 6}, "ack of orders-2 below next_offset 6, past 5"},
	} {
		err := ack(s, c.a)
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ack %v: %v, want INVALID_REQUEST %q", c.a, err, c.want)
		}
	}
	if s.outRecords != 5 || p.commitPoint() != 0 {
		t.Fatalf("after refused acks: %d outstanding, commit point %d; want 5, 0", s.outRecords, p.commitPoint())
	}
}
