package testcluster_test

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// Subscribe streams in the recommended form: records in SubscribeBatch
// events, acknowledged whole with next_offset.

// lastOffsets is, per partition read, the offset after its last record.
func (s *subStream) lastOffsets() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for p, rs := range s.records {
		if len(rs) > 0 {
			out[p] = rs[len(rs)-1].Offset + 1
		}
	}
	return out
}

// TestClusterSubscribeBatches: a stream of batches, on a node that leads
// only some of the topic's partitions, gets each partition's records in
// SubscribeBatch events in offset order, never more than its record
// credit outstanding; acknowledging a batch's next_offset frees its
// records' credit and commits it; at the end everything produced was read
// once and committed, and a clean close leaves the group. Acknowledging
// past what was sent is refused INVALID_REQUEST on the stream, saying so.
func TestClusterSubscribeBatches(t *testing.T) {
	t.Parallel()
	c, ctx, ctl := subCluster(t, 3000)
	createTopic(t, c, ctl, "bt", 3, 3)
	waitTopic(ctx, c, "bt")
	produceN(ctx, t, c, "bt", 3, 10, "r")
	// A node that leads at most one of the three: the others are read
	// from their leaders.
	via := c.IDs()[0]
	for _, id := range c.IDs() {
		led := 0
		tp, _ := c.Image(ctl).Topic("bt")
		for _, p := range tp.Partitions {
			if p.Leader == id {
				led++
			}
		}
		if led <= 1 {
			via = id
			break
		}
	}
	start := &quirev1.SubscribeStart{Group: "bg", Subscription: &quirev1.GroupSubscription{Topics: []string{"bt"}},
		MaxOutstandingRecords: 4, CommitIntervalMs: 50, Batches: true}
	s := subscribe(t, c, via, "S", start, false)
	s.wait(ctx, "4 records", func() bool { return s.totalLocked() >= 4 })
	// The broker never sends past the credit: still 4 until an ack.
	s.mu.Lock()
	n, batches := s.totalLocked(), len(s.batches)
	var first *quirev1.SubscribeBatch
	if batches > 0 {
		first = s.batches[0]
	}
	s.mu.Unlock()
	if n != 4 || first == nil {
		t.Fatalf("%d records in %d batches before any ack, want 4 in batches", n, batches)
	}
	for p, rs := range s.records {
		for i, r := range rs {
			if r.Offset != int64(i) || r.GetValue() != fmt.Sprintf("r-%s-%d", strings.TrimPrefix(p, "bt-"), i) {
				t.Fatalf("%s record %d: %v", p, i, r)
			}
		}
	}

	ackedAt := time.Now()
	s.ackBelow(first.Topic, first.Partition, first.NextOffset)
	s.wait(ctx, "a fifth record", func() bool { return s.totalLocked() >= 5 })
	s.mu.Lock()
	var fifthAt time.Time
	for _, at := range s.recvAt {
		if len(at) > 0 && at[len(at)-1].After(fifthAt) {
			fifthAt = at[len(at)-1]
		}
	}
	s.mu.Unlock()
	if fifthAt.Before(ackedAt) {
		t.Fatalf("a fifth record read at %v, before the ack at %v freed its credit", fifthAt, ackedAt)
	}
	c.Eventually(ctx, "the first batch committed", func() error {
		if got, err := committedAt(ctx, c, ctl, "bg", first.Topic, first.Partition); err != nil || got != first.NextOffset {
			return fmt.Errorf("%s-%d committed at %d (%v), want %d", first.Topic, first.Partition, got, err, first.NextOffset)
		}
		return nil
	})

	// From here every batch is acknowledged as it comes, and what came
	// before it now.
	s.mu.Lock()
	s.autoAck = true
	s.mu.Unlock()
	for p, next := range s.lastOffsets() {
		s.ackBelow("bt", partOf(t, p), next)
	}
	s.wait(ctx, "all 30 records", func() bool { return s.totalLocked() == 30 })
	for p := range int32(3) {
		if got := s.offsets(tpName("bt", p)); !slices.Equal(got, span(0, 10)) {
			t.Fatalf("bt-%d read %v, want 0..9 once each", p, got)
		}
	}
	c.Eventually(ctx, "everything committed", func() error {
		for p := range int32(3) {
			if got, err := committedAt(ctx, c, ctl, "bg", "bt", p); err != nil || got != 10 {
				return fmt.Errorf("bt-%d committed at %d (%v)", p, got, err)
			}
		}
		return nil
	})
	if err := s.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("closed stream ended with %v, want OK", err)
	}
	if d, err := groups(c, ctl).DescribeGroup(ctx, &quirev1.DescribeGroupRequest{Group: "bg"}); err != nil || len(d.Members) != 0 {
		t.Fatalf("describe after a clean close: %v, %v; want no members", d, err)
	}

	// Past what was sent: refused, naming the offsets.
	produceN(ctx, t, c, "bt", 1, 2, "late")
	s2 := subscribe(t, c, via, "S2", start, false)
	s2.wait(ctx, "the 2 new records", func() bool { return len(s2.records["bt-0"]) == 2 })
	s2.ackBelow("bt", 0, 13)
	checkRefused(t, s2.refusedAck(ctx, 1), "ack of bt-0 below next_offset 13, past 12")
	if got := fetchOffset(ctx, t, c, ctl, "bg", "bt", 0); got != 10 {
		t.Fatalf("bt-0 committed at %d after a refused ack, want 10 still", got)
	}
}

// partOf is the partition number of a tpName.
func partOf(t *testing.T, name string) int32 {
	t.Helper()
	i := strings.LastIndexByte(name, '-')
	p, err := strconv.Atoi(name[i+1:])
	if err != nil {
		t.Fatalf("partition name %q: %v", name, err)
	}
	return int32(p)
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// TestClusterSubscribeBatchRevoked: a stream that read two partitions'
// batches and acknowledged each partway (7 of 10) has one revoked when a
// second stream joins: the revoked partition is committed at 7 then and
// there (commits on the interval are off), the other stream reads it from
// 7, a late ack of it is ignored, and the credit its unacknowledged
// records held is the first stream's again.
func TestClusterSubscribeBatchRevoked(t *testing.T) { subscribeRevoked(t, false) }

// TestClusterSubscribeRawRevoked is TestClusterSubscribeBatchRevoked with
// raw_batches: each partition's 10 records come as one stored batch, the
// acks of 7 go into it (the commit point moves, the batch's 10 records
// stay counted until it is acknowledged whole), so A's credit of 20 is
// full until the revocation returns the revoked batch's 10, and the
// kept partition's next batch (15 records) comes only then.
func TestClusterSubscribeRawRevoked(t *testing.T) { subscribeRevoked(t, true) }

// checkFencing fails unless the fencing tokens (fencing_epoch, offset) of
// partition p's records grow within each stream, are all given (an epoch
// above 0), and each stream's are all above those of the streams that
// owned p before it (in order), though it re-reads offsets they read.
func checkFencing(t *testing.T, p string, owners ...*subStream) {
	t.Helper()
	var prev []fencingToken
	prevName := ""
	for _, s := range owners {
		s.mu.Lock()
		toks := slices.Clone(s.tokens[p])
		s.mu.Unlock()
		if len(toks) == 0 {
			t.Fatalf("%s: no record of %s", s.name, p)
		}
		for i, tok := range toks {
			if tok.epoch <= 0 {
				t.Fatalf("%s: record %s@%d has fencing epoch %d", s.name, p, tok.offset, tok.epoch)
			}
			if i > 0 && !toks[i-1].less(tok) {
				t.Fatalf("%s: %s's fencing token %v after %v", s.name, p, tok, toks[i-1])
			}
			for _, old := range prev {
				if !old.less(tok) {
					t.Fatalf("%s: %s's fencing token %v is not above %v, given to %s before", s.name, p, tok, old, prevName)
				}
			}
		}
		t.Logf("%s: %s fencing tokens from %v to %v", s.name, p, toks[0], toks[len(toks)-1])
		prev, prevName = append(prev, toks...), s.name
	}
}

func subscribeRevoked(t *testing.T, raw bool) {
	c, ctx, ctl := subCluster(t, 5000)
	createTopic(t, c, ctl, "rv", 2, 3)
	waitTopic(ctx, c, "rv")
	produceN(ctx, t, c, "rv", 2, 10, "a")
	// A leaves 3 records of the partition it gives up unacknowledged,
	// so the handover waits for them 3/4 of the rebalance timeout: 3 s.
	start := func() *quirev1.SubscribeStart {
		return &quirev1.SubscribeStart{Group: "rvg", Subscription: &quirev1.GroupSubscription{Topics: []string{"rv"}},
			MaxOutstandingRecords: 20, CommitIntervalMs: 600000, Assignor: "range", Batches: !raw, RawBatches: raw,
			RebalanceTimeoutMs: 4000}
	}
	a := subscribe(t, c, c.IDs()[0], "A", start(), false)
	a.wait(ctx, "A reads 20", func() bool { return a.totalLocked() == 20 && len(a.owned) == 2 })
	a.ackBelow("rv", 0, 7)
	a.ackBelow("rv", 1, 7)

	b := subscribe(t, c, c.IDs()[1], "B", start(), true)
	b.wait(ctx, "B owns 1", func() bool { return len(b.owned) == 1 })
	a.wait(ctx, "A owns 1", func() bool { return len(a.owned) == 1 })
	revoked, kept := b.ownedNow()[0], a.ownedNow()[0]
	rp, kp := partOf(t, revoked), partOf(t, kept)
	if got := fetchOffset(ctx, t, c, ctl, "rvg", "rv", rp); got != 7 {
		t.Fatalf("%s committed at %d on its revocation, want 7 (acknowledged below 7)", revoked, got)
	}
	b.wait(ctx, "B reads the rest of "+revoked, func() bool { return len(b.records[revoked]) == 3 })
	if got := b.offsets(revoked); !slices.Equal(got, []int64{7, 8, 9}) {
		t.Fatalf("B read %s offsets %v, want 7 8 9 (from A's commit)", revoked, got)
	}
	a.ackBelow("rv", rp, 10) // too late: ignored, the stream goes on

	// A holds 3 unacknowledged records of the partition it kept; the 3
	// of the one it gave up are its credit again, so all 15 new ones come
	// (only 14 would, were those 3 still counted).
	produceN(ctx, t, c, "rv", 2, 15, "b")
	a.wait(ctx, "A reads 15 more of "+kept, func() bool { return len(a.records[kept]) == 25 })
	if got := a.offsets(kept); !slices.Equal(got, span(0, 25)) {
		t.Fatalf("A read %s offsets %v", kept, got)
	}
	if got := len(a.offsets(revoked)); got != 10 {
		t.Fatalf("A read %d records of %s, which it gave up after 10", got, revoked)
	}
	checkViews(t, a, b)
	checkFencing(t, revoked, a, b)
	b.wait(ctx, "B reads the new records of "+revoked, func() bool { return len(b.records[revoked]) == 18 })
	a.ackBelow("rv", kp, 25)
	if err := a.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("A ended with %v, want OK", err)
	}
	if got := fetchOffset(ctx, t, c, ctl, "rvg", "rv", kp); got != 25 {
		t.Fatalf("%s committed at %d after A closed, want 25", kept, got)
	}
	if err := b.closeSend(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("B ended with %v, want OK", err)
	}
	if got := fetchOffset(ctx, t, c, ctl, "rvg", "rv", rp); got != 25 {
		t.Fatalf("%s committed at %d after B closed, want 25", revoked, got)
	}
	checkViews(t, a, b)
}
