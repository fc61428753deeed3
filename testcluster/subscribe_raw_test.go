package testcluster_test

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// rawEvents is a copy of the SubscribeRawBatch events read so far.
func (s *subStream) rawEvents() []*quirev1.SubscribeRawBatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.raws)
}

// TestClusterSubscribeRaw: a raw_batches stream gets each partition's
// batches as stored (each produce request here is one batch), decoding to
// the records produced; an ack into a batch (next_offset 4 of a batch of
// 10) commits 4 but frees none of the batch's credit, so nothing more
// comes; a second stream then gets that batch again, whole, from its
// base offset 0 with start_offset 4, and its credit counts the 6 records
// at or past 4 (with a credit of 6, the next batch waits for its ack).
// Acknowledging by offsets, or past what was sent, is refused
// INVALID_REQUEST on the stream, saying so, and commits nothing.
func TestClusterSubscribeRaw(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := subCluster(t, 3000)
	createTopic(t, c, ctl, "raw", 1, 3)
	waitTopic(ctx, c, "raw")
	produceN(ctx, t, c, "raw", 1, 10, "a")
	via := c.IDs()[0]
	start := func(records int32) *quirev1.SubscribeStart {
		return &quirev1.SubscribeStart{Group: "rg", Subscription: &quirev1.GroupSubscription{Topics: []string{"raw"}},
			MaxOutstandingRecords: records, CommitIntervalMs: 50, RawBatches: true}
	}
	a := subscribe(t, c, via, "A", start(4), false)
	// A batch is sent whole while the credit is not used up: all 10,
	// though the credit is 4.
	a.wait(ctx, "the first batch", func() bool { return len(a.raws) == 1 })
	ev := a.rawEvents()[0]
	if ev.StartOffset != 0 || ev.NextOffset != 10 {
		t.Fatalf("first raw batch from %d to %d, want 0 to 10", ev.StartOffset, ev.NextOffset)
	}
	if got := a.offsets("raw-0"); !slices.Equal(got, span(0, 10)) {
		t.Fatalf("A decoded offsets %v, want 0..9", got)
	}
	a.mu.Lock()
	for i, r := range a.records["raw-0"] {
		if want := fmt.Sprintf("a-0-%d", i); r.GetValue() != want {
			t.Errorf("record %d: value %q, want %q", i, r.GetValue(), want)
		}
	}
	a.mu.Unlock()
	a.ackBelow("raw", 0, 4)
	c.Eventually(ctx, "the ack into the batch committed", func() error {
		if got, err := committedAt(ctx, c, ctl, "rg", "raw", 0); err != nil || got != 4 {
			return fmt.Errorf("committed at %d (%v), want 4", got, err)
		}
		return nil
	})
	// The batch is still outstanding: a new one is not sent (B below
	// shows the credit holding a batch back until its ack).
	produceN(ctx, t, c, "raw", 1, 10, "b")
	if err := a.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("A ended with %v, want OK", err)
	}
	if got := len(a.rawEvents()); got != 1 {
		t.Fatalf("A read %d raw batches with its credit used up, want 1", got)
	}
	if got := fetchOffset(ctx, t, c, ctl, "rg", "raw", 0); got != 4 {
		t.Fatalf("committed at %d after A closed, want 4 (what it acknowledged)", got)
	}

	// From the committed 4: the stored batch from 0, records below 4 to
	// be skipped; it counts 6 records, the whole credit.
	b := subscribe(t, c, via, "B", start(6), false)
	b.wait(ctx, "the batch holding 4", func() bool { return len(b.raws) == 1 })
	ev = b.rawEvents()[0]
	if ev.StartOffset != 4 || ev.NextOffset != 10 {
		t.Fatalf("B's first raw batch from %d to %d, want 4 to 10", ev.StartOffset, ev.NextOffset)
	}
	if err := record.SplitBatches(ev.Records, func(_ []byte, h record.Header) error {
		if h.BaseOffset != 0 {
			return fmt.Errorf("base offset %d, want the stored batch's 0", h.BaseOffset)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := b.offsets("raw-0"); !slices.Equal(got, span(4, 10)) {
		t.Fatalf("B decoded offsets %v past start_offset, want 4..9", got)
	}
	ackedAt := time.Now()
	b.ackBelow("raw", 0, 10)
	b.wait(ctx, "the second batch after the ack", func() bool { return len(b.raws) == 2 })
	b.mu.Lock()
	secondAt := b.recvAt["raw-0"][6]
	b.mu.Unlock()
	if secondAt.Before(ackedAt) {
		t.Fatalf("the second batch (produced before B started) read at %v, before the ack at %v freed the credit", secondAt, ackedAt)
	}
	ev = b.rawEvents()[1]
	if ev.StartOffset != 10 || ev.NextOffset != 20 {
		t.Fatalf("B's second raw batch from %d to %d, want 10 to 20", ev.StartOffset, ev.NextOffset)
	}
	if got := b.offsets("raw-0"); !slices.Equal(got, span(4, 20)) {
		t.Fatalf("B decoded offsets %v, want 4..19", got)
	}
	b.mu.Lock()
	if r := b.records["raw-0"][len(b.records["raw-0"])-1]; r.GetValue() != "b-0-9" {
		t.Errorf("last record %q, want b-0-9", r.GetValue())
	}
	b.mu.Unlock()
	b.ackBelow("raw", 0, 20)
	c.Eventually(ctx, "everything committed", func() error {
		if got, err := committedAt(ctx, c, ctl, "rg", "raw", 0); err != nil || got != 20 {
			return fmt.Errorf("committed at %d (%v), want 20", got, err)
		}
		return nil
	})
	// Acknowledging past what was sent.
	b.ackBelow("raw", 0, 25)
	checkRefused(t, b.refusedAck(ctx, 1), "ack of raw-0 below next_offset 25, past 20")
	if err := b.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("B's close after a refused ack: %v, want OK", err)
	}

	// By offsets: a raw stream takes next_offset only.
	produceN(ctx, t, c, "raw", 1, 2, "c")
	d := subscribe(t, c, via, "D", start(0), false)
	d.wait(ctx, "the new batch", func() bool { return len(d.raws) == 1 })
	d.ack("raw", 0, 20)
	checkRefused(t, d.refusedAck(ctx, 1), "ack of raw-0 by offsets, but a raw_batches stream is acknowledged by next_offset only")
	if got := fetchOffset(ctx, t, c, ctl, "rg", "raw", 0); got != 20 {
		t.Fatalf("committed at %d after refused acks, want 20 still", got)
	}
}
