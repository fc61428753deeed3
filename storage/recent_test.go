package storage

import (
	"math"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/quirelog/quire/record"
)

func TestRecentBatchesRing(t *testing.T) {
	t.Parallel()
	var r recentBatches
	if _, _, ok := r.lookup(5); ok {
		t.Fatal("empty ring found a batch")
	}
	// Batches of two offsets each, 100 bytes apart, more than the ring keeps.
	n := recentBatchesKept + 10
	for i := range n {
		r.add(int64(2*i), int64(100*i))
	}
	oldest := int64(2 * (n - recentBatchesKept))
	for _, c := range []struct {
		target, off, pos int64
		ok               bool
	}{
		{target: oldest - 1, ok: false}, // fell out of the ring
		{target: oldest, off: oldest, pos: 50 * oldest, ok: true},
		{target: oldest + 1, off: oldest, pos: 50 * oldest, ok: true},
		{target: int64(2*n - 1), off: int64(2 * (n - 1)), pos: int64(100 * (n - 1)), ok: true},
		{target: math.MaxInt64, off: int64(2 * (n - 1)), pos: int64(100 * (n - 1)), ok: true},
	} {
		off, pos, ok := r.lookup(c.target)
		if ok != c.ok || (ok && (off != c.off || pos != c.pos)) {
			t.Errorf("lookup(%d) = %d, %d, %v; want %d, %d, %v", c.target, off, pos, ok, c.off, c.pos, c.ok)
		}
	}
	// Cutting at the file position of batch n-5 drops it and the later ones.
	r.truncateToPos(int64(100 * (n - 5)))
	if off, _, _ := r.lookup(math.MaxInt64); off != int64(2*(n-6)) {
		t.Fatalf("after the cut the newest batch is at %d, want %d", off, 2*(n-6))
	}
	r.add(int64(2*(n-5)), int64(100*(n-5))+7) // rewritten elsewhere
	if off, pos, _ := r.lookup(math.MaxInt64); off != int64(2*(n-5)) || pos != int64(100*(n-5))+7 {
		t.Fatalf("after the rewrite: %d at %d", off, pos)
	}
	r.truncateToPos(0)
	if _, _, ok := r.lookup(math.MaxInt64); ok {
		t.Fatal("a cut at 0 left batches")
	}
}

// A read at the log's end finds its batch from where the appends put it:
// two reads of the segment (the header, then the batches), not one per
// batch since the last index entry. Reads everywhere stay right, also after
// a truncation rewrote the tail.
func TestLogTailReadUsesRecentBatches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	efs := NewErrorFS(noSyncFS{})
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.SegmentIndexBytes = 1 << 16
	cfg.IndexIntervalBytes = 1 << 16 // no index entry in the segment
	l, err := OpenLog(dir, "t", 0, cfg, 0, Options{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const batches = 100
	for range batches {
		mustAppend(t, l, makeBatch(1, 20, 1), 0)
	}
	var reads atomic.Int64
	efs.SetInjector(func(op Op, path string) error {
		if op == OpRead && filepath.Ext(path) == ".log" {
			reads.Add(1)
		}
		return nil
	})
	res, err := l.Read(batches-1, 1<<16, math.MaxInt64)
	if err != nil || res.HighOffset != batches {
		t.Fatalf("read at the tail: %v, high offset %d", err, res.HighOffset)
	}
	if got := reads.Load(); got > 2 {
		t.Fatalf("a read at the tail took %d reads of the segment, want 2", got)
	}
	// Far behind the tail, below what the ring keeps, the walk remains.
	reads.Store(0)
	if _, err := l.Read(0, 1<<16, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if got := reads.Load(); got != 2 {
		t.Fatalf("a read at the start took %d reads, want 2 (scan from position 0)", got)
	}
	efs.SetInjector(nil)
	if got := readAll(t, l); len(got) != batches {
		t.Fatalf("read back %d batches, want %d", len(got), batches)
	}

	// Cut the tail and append other batches in its place: reads at the
	// rewritten offsets find the new batches.
	if err := l.Truncate(batches - 10); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		mustAppend(t, l, makeBatch(2, 30, 1), 1)
	}
	for i := range 10 {
		off := int64(batches - 10 + 2*i)
		res, err := l.Read(off, 1, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		h, err := record.ParseHeader(res.Batches)
		if err != nil || h.BaseOffset != off || h.LastOffset() != off+1 || h.PartitionLeaderEpoch != 1 {
			t.Fatalf("read at %d after the rewrite: batch [%d, %d] of epoch %d (%v), want the new one [%d, %d] of epoch 1",
				off, h.BaseOffset, h.LastOffset(), h.PartitionLeaderEpoch, err, off, off+1)
		}
	}
}

// A recent batch that no longer starts where the ring said (a truncation
// cut it while a reader held the hint) sends the search back to the index
// without marking the index suspect: that would make every later read of
// the segment scan it from the start.
func TestLocateFromStaleRecentBatch(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	for range 5 {
		mustAppend(t, l, makeBatch(1, 10, 1), 0)
	}
	seg := l.activeSegment()
	limit := seg.size.Load()
	l.mu.RLock()
	idxOff, idxPos := seg.idx.lookup(4)
	_, pos3, ok := seg.recent.lookup(3)
	l.mu.RUnlock()
	if !ok {
		t.Fatal("no recent batch at 3")
	}
	// The ring says offset 9 starts where 3 does: stale.
	pos, h, found, err := seg.locateFromRecent(4, 9, pos3, idxOff, idxPos, limit)
	if err != nil || !found || h.BaseOffset != 4 {
		t.Fatalf("locate 4 from a stale hint: found %v at %d (batch %d), %v", found, pos, h.BaseOffset, err)
	}
	if seg.indexSuspect.Load() {
		t.Fatal("a stale recent batch marked the index suspect")
	}
	// A good hint below the target walks on from it.
	if _, h, found, err := seg.locateFromRecent(4, 3, pos3, idxOff, idxPos, limit); err != nil || !found || h.BaseOffset != 4 {
		t.Fatalf("locate 4 from the batch at 3: found %v (batch %d), %v", found, h.BaseOffset, err)
	}
}
