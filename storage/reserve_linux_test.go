package storage

import (
	"math"
	"syscall"
	"testing"
)

// allocated is the disk space a file holds, which fallocate with
// FALLOC_FL_KEEP_SIZE grows past its size.
func allocated(t *testing.T, name string) (size, disk int64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	return st.Size, st.Blocks * 512
}

func TestLogPreallocateReservesAheadAndGivesBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = 64 << 20
	l := openTest(t, dir, cfg, 0)
	batch := makeBatch(100, 100, 1)
	for range 10 {
		mustAppend(t, l, batch, 0)
	}
	seg := l.activeSegment()
	if seg.reserved == math.MaxInt64 {
		t.Skip("this filesystem cannot reserve space")
	}
	name := seg.stem + logSuffix
	data := int64(10 * len(batch))
	if size, disk := allocated(t, name); size != data || disk < minReserve {
		t.Fatalf("active segment: size %d, %d bytes on disk; want size %d and %d reserved", size, disk, data, minReserve)
	}

	// A cut gives the reservation back and the next append takes it anew.
	if err := l.Truncate(500); err != nil {
		t.Fatal(err)
	}
	if seg.reserved != seg.size.Load() {
		t.Fatalf("reserved %d after truncating to %d bytes", seg.reserved, seg.size.Load())
	}
	mustAppend(t, l, batch, 0)
	if _, disk := allocated(t, name); disk < minReserve {
		t.Fatalf("%d bytes on disk after the append that follows a truncation", disk)
	}

	// Rolling trims the old segment to its data.
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	size, disk := allocated(t, name)
	if disk >= size+minReserve/2 {
		t.Fatalf("rolled segment: size %d, %d bytes on disk", size, disk)
	}
	mustAppend(t, l, batch, 0)
	active := l.activeSegment().stem + logSuffix
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if size, disk := allocated(t, active); disk >= size+minReserve/2 {
		t.Fatalf("closed segment: size %d, %d bytes on disk", size, disk)
	}

	// The data is all there after reopening.
	l = openTest(t, dir, cfg, math.MaxInt64)
	defer l.Close()
	if got := len(readAll(t, l)); got != 7 {
		t.Fatalf("%d batches after reopen, want 7", got)
	}
}

func TestLogWithoutPreallocateReservesNothing(t *testing.T) {
	t.Parallel()
	cfg := DefaultLogConfig()
	cfg.Preallocate = false
	l := openTest(t, t.TempDir(), cfg, 0)
	defer l.Close()
	mustAppend(t, l, makeBatch(100, 100, 1), 0)
	if size, disk := allocated(t, l.activeSegment().stem+logSuffix); disk >= size+minReserve/2 {
		t.Fatalf("size %d, %d bytes on disk", size, disk)
	}
}
