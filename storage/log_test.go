package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quirelog/quire/record"
)

func TestLogAppendRead(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	var want [][]byte
	for i := 0; i < 50; i++ {
		b := makeBatch(i%5+1, 40, int64(1000+i))
		info := mustAppend(t, l, b, 3)
		if info.NumRecords != i%5+1 || info.LastOffset-info.FirstOffset+1 != int64(i%5+1) {
			t.Fatalf("info %+v", info)
		}
		h, _ := record.ParseHeader(b)
		if h.BaseOffset != info.FirstOffset || h.PartitionLeaderEpoch != 3 {
			t.Fatalf("batch not stamped: %+v", h)
		}
		want = append(want, b)
	}
	if l.NumSegments() < 2 {
		t.Fatalf("expected rolls, have %d segments", l.NumSegments())
	}
	got := readAll(t, l)
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	// Every offset reads back the batch holding it.
	for off := int64(0); off < l.LogEndOffset(); off++ {
		res, err := l.Read(off, 1, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		h, err := record.Validate(res.Batches)
		if err != nil || off < h.BaseOffset || off > h.LastOffset() {
			t.Fatalf("offset %d: %v %+v", off, err, h)
		}
	}
}

func TestLogReadBounds(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	for i := 0; i < 4; i++ {
		mustAppend(t, l, makeBatch(10, 10, 1), 0) // offsets 0..39
	}
	if _, err := l.Read(41, 100, math.MaxInt64); !errors.Is(err, ErrOffsetOutOfRange) ||
		err.Error() != "storage: offset out of range: offset 41, valid offsets are 0 to 39 (log end 40)" {
		t.Fatalf("past LEO: %v", err)
	}
	if _, err := l.Read(-1, 100, math.MaxInt64); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("negative: %v", err)
	}
	res, err := l.Read(40, 100, math.MaxInt64)
	if err != nil || len(res.Batches) != 0 || res.HighOffset != 40 || res.LogEndOffset != 40 {
		t.Fatalf("at LEO: %v %+v", err, res)
	}
	// maxOffset (the HW) stops reads before batches that reach it.
	res, _ = l.Read(0, 1<<20, 25)
	if res.HighOffset != 20 {
		t.Fatalf("maxOffset 25: high %d", res.HighOffset)
	}
	res, _ = l.Read(20, 1<<20, 25)
	if len(res.Batches) != 0 {
		t.Fatalf("batch straddling maxOffset returned")
	}
	// maxBytes smaller than a batch still returns one batch.
	res, _ = l.Read(13, 1, math.MaxInt64)
	if h, err := record.Validate(res.Batches); err != nil || h.BaseOffset != 10 || res.HighOffset != 20 {
		t.Fatalf("small maxBytes: %v %+v", err, h)
	}
}

func TestLogAppendRejectsBadBatches(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	cfg.MaxMessageBytes = 500
	l := openTest(t, t.TempDir(), cfg, 0)
	defer l.Close()
	good := makeBatch(2, 10, 1)
	mustAppend(t, l, good, 0)
	bad := append([]byte(nil), makeBatch(2, 10, 1)...)
	bad[len(bad)-1] ^= 0xff
	twoGoodOneBad := append(append(makeBatch(1, 1, 1), makeBatch(1, 1, 1)...), bad...)
	snapshot := append([]byte(nil), twoGoodOneBad...)
	if _, err := l.AppendAsLeader(twoGoodOneBad, 0); !errors.Is(err, ErrCorruptBatch) || !errors.Is(err, record.ErrBadCRC) {
		t.Fatalf("bad crc: %v", err)
	}
	if !bytes.Equal(snapshot, twoGoodOneBad) {
		t.Fatal("rejected append mutated the buffer")
	}
	if _, err := l.AppendAsLeader(makeBatch(10, 100, 1), 0); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if _, err := l.AppendAsLeader(good[:30], 0); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("truncated: %v", err)
	}
	if l.LogEndOffset() != 2 || l.Size() != int64(len(good)) {
		t.Fatalf("log changed: leo %d size %d", l.LogEndOffset(), l.Size())
	}
}

func TestLogAppendAsFollower(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	b := makeBatch(3, 10, 1)
	record.SetBaseOffset(b, 0)
	record.SetPartitionLeaderEpoch(b, 5)
	if _, err := l.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	over := makeBatch(1, 10, 1)
	record.SetBaseOffset(over, 2)
	if _, err := l.AppendAsFollower(over); !errors.Is(err, ErrOffsetOverlap) {
		t.Fatalf("overlap: %v", err)
	}
	// A gap is refused in a log that is not compacted: only a cleaner
	// removes whole batches.
	gap := makeBatch(1, 10, 1)
	record.SetBaseOffset(gap, 4)
	record.SetPartitionLeaderEpoch(gap, 5)
	if _, err := l.AppendAsFollower(gap); !errors.Is(err, ErrOffsetGap) {
		t.Fatalf("gap in a log that is not compacted: %v", err)
	}
	if l.LogEndOffset() != 3 {
		t.Fatalf("leo %d after a refused gap", l.LogEndOffset())
	}
	// In a compacted log (batches its leader's cleaner removed), it is
	// taken.
	cfg := l.Config()
	cfg.Compact = true
	l.SetConfig(cfg)
	if _, err := l.AppendAsFollower(gap); err != nil {
		t.Fatalf("gap in a compacted log: %v", err)
	}
	if e, ok := l.LatestEpoch(); !ok || e != 5 || l.LogEndOffset() != 5 {
		t.Fatalf("epoch %d %v leo %d", e, ok, l.LogEndOffset())
	}
}

// TestLogAppendAsFollowerHugeGap: a follower of a compacted log takes a
// batch 2^33 offsets past its log end, both after records and
// into an empty active segment, in a segment of its own whose relative
// offsets fit, and reads and indexes it right.
func TestLogAppendAsFollowerHugeGap(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	cfg.Compact = true
	cfg.SegmentBytes = 1 << 20
	for _, first := range []int{3, 0} {
		t.Run(fmt.Sprint(first, " records first"), func(t *testing.T) {
			dir := t.TempDir()
			l := openTest(t, dir, cfg, 0)
			defer func() { l.Close() }()
			if first > 0 {
				b := makeBatch(first, 10, 1)
				record.SetBaseOffset(b, 0)
				if _, err := l.AppendAsFollower(b); err != nil {
					t.Fatal(err)
				}
			}
			far := int64(1)<<33 + 10 // beyond even uint32 relative offsets
			for i := int64(0); i < 3; i++ {
				b := makeBatch(2, 300, 2)
				record.SetBaseOffset(b, far+2*i)
				if _, err := l.AppendAsFollower(b); err != nil {
					t.Fatal(err)
				}
			}
			if l.LogEndOffset() != far+6 {
				t.Fatalf("leo %d, want %d", l.LogEndOffset(), far+6)
			}
			check := func(what string) {
				t.Helper()
				checkSegmentIndexes(t, l)
				for off := far; off < far+6; off++ {
					res, err := l.Read(off, 1<<16, math.MaxInt64)
					if err != nil {
						t.Fatalf("%s: read at %d: %v", what, off, err)
					}
					h, err := record.ParseHeader(res.Batches)
					if err != nil || h.BaseOffset > off || h.LastOffset() < off {
						t.Fatalf("%s: read at %d: batch [%d, %d], %v", what, off, h.BaseOffset, h.LastOffset(), err)
					}
				}
			}
			check("appended")
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTest(t, dir, cfg, 0)
			if l.LogEndOffset() != far+6 {
				t.Fatalf("leo %d after reopening, want %d", l.LogEndOffset(), far+6)
			}
			check("reopened")
		})
	}
}

func TestLogReopenClean(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := smallConfig()
	l := openTest(t, dir, cfg, 0)
	for i := 0; i < 40; i++ {
		mustAppend(t, l, makeBatch(3, 50, int64(i)), int32(i/10))
	}
	want := readAll(t, l)
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Inactive index files are trimmed to their entries.
	matches, _ := filepath.Glob(filepath.Join(dir, "*.index"))
	for _, m := range matches {
		st, _ := os.Stat(m)
		if st.Size() >= int64(cfg.SegmentIndexBytes) || st.Size()%8 != 0 {
			t.Fatalf("%s not trimmed: %d", m, st.Size())
		}
	}
	l = openTest(t, dir, cfg, math.MaxInt64)
	defer l.Close()
	if l.LogEndOffset() != leo || l.RecoveryPoint() != leo {
		t.Fatalf("leo %d rp %d, want %d", l.LogEndOffset(), l.RecoveryPoint(), leo)
	}
	got := readAll(t, l)
	if len(got) != len(want) {
		t.Fatalf("%d batches after reopen, want %d", len(got), len(want))
	}
	if e, _ := l.LatestEpoch(); e != 3 {
		t.Fatalf("epoch %d", e)
	}
	mustAppend(t, l, makeBatch(1, 1, 1), 3)
	if l.LogEndOffset() != leo+1 {
		t.Fatal("append after reopen")
	}
}

func TestLogTruncate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTest(t, dir, smallConfig(), 0)
	defer l.Close()
	for i := 0; i < 60; i++ {
		mustAppend(t, l, makeBatch(2, 40, int64(i)), int32(i/20)) // epoch 0,1,2
	}
	segs := l.NumSegments()
	if err := l.Truncate(51); err != nil { // inside the batch [50,51]
		t.Fatal(err)
	}
	if l.LogEndOffset() != 50 {
		t.Fatalf("leo %d", l.LogEndOffset())
	}
	if l.NumSegments() >= segs {
		t.Fatalf("segments %d, was %d", l.NumSegments(), segs)
	}
	if e, o := l.EndOffsetForEpoch(1); e != 1 || o != 50 {
		t.Fatalf("epoch 1 ends %d %d", e, o)
	}
	if e, o := l.EndOffsetForEpoch(2); e != -1 || o != -1 {
		t.Fatalf("truncated epoch 2: %d %d", e, o)
	}
	if got := readAll(t, l); len(got) != 25 {
		t.Fatalf("%d batches", len(got))
	}
	info := mustAppend(t, l, makeBatch(1, 1, 100), 4)
	if info.FirstOffset != 50 {
		t.Fatalf("append after truncate at %d", info.FirstOffset)
	}
	if err := l.Truncate(10); err != nil {
		t.Fatal(err)
	}
	if e, ok := l.LatestEpoch(); !ok || e != 0 || l.LogEndOffset() != 10 {
		t.Fatalf("epoch %d leo %d", e, l.LogEndOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openTest(t, dir, smallConfig(), 0)
	defer l2.Close()
	if l2.LogEndOffset() != 10 || len(readAll(t, l2)) != 5 {
		t.Fatalf("after reopen leo %d", l2.LogEndOffset())
	}
}

func TestLogEndOffsetForEpoch(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	if e, o := l.EndOffsetForEpoch(0); e != -1 || o != -1 {
		t.Fatalf("empty: %d %d", e, o)
	}
	mustAppend(t, l, makeBatch(5, 1, 1), 2) // 0-4 epoch 2
	mustAppend(t, l, makeBatch(5, 1, 1), 4) // 5-9 epoch 4
	mustAppend(t, l, makeBatch(5, 1, 1), 7) // 10-14 epoch 7
	cases := []struct {
		req, epoch int32
		off        int64
	}{
		{7, 7, 15}, {4, 4, 10}, {5, 4, 10}, {6, 4, 10}, {2, 2, 5}, {1, 1, 0}, {8, -1, -1}, {-1, -1, -1},
	}
	for _, c := range cases {
		if e, o := l.EndOffsetForEpoch(c.req); e != c.epoch || o != c.off {
			t.Errorf("epoch %d: got (%d, %d), want (%d, %d)", c.req, e, o, c.epoch, c.off)
		}
	}
}

func TestLogDeleteRecordsAndRetention(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	cfg := smallConfig()
	l, err := OpenLog(t.TempDir(), "t", 0, cfg, 0, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 60; i++ {
		mustAppend(t, l, makeBatch(2, 40, int64(1000+i*1000)), 0)
	}
	n := l.NumSegments()
	if err := l.DeleteRecordsBefore(l.LogEndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past leo: %v", err)
	}
	if err := l.DeleteRecordsBefore(61); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 61 || l.NumSegments() >= n {
		t.Fatalf("start %d segs %d (was %d)", l.LogStartOffset(), l.NumSegments(), n)
	}
	if _, err := l.Read(60, 100, math.MaxInt64); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	res, err := l.Read(61, 1, math.MaxInt64)
	if h, _ := record.ParseHeader(res.Batches); err != nil || h.BaseOffset != 60 {
		t.Fatalf("read at start: %v", err)
	}
	// Size retention: keep at most ~2 segments of data.
	cfg.RetentionBytes = 2 * cfg.SegmentBytes
	l.SetConfig(cfg)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.Size() > cfg.RetentionBytes+cfg.SegmentBytes || l.NumSegments() > 3 {
		t.Fatalf("size %d segs %d", l.Size(), l.NumSegments())
	}
	// Time retention: everything is old, but the active segment stays.
	cfg.RetentionBytes = -1
	cfg.RetentionMs = 10
	l.SetConfig(cfg)
	clock.t = time.UnixMilli(10_000_000)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 1 || l.LogStartOffset() != l.activeSegment().base {
		t.Fatalf("segs %d start %d", l.NumSegments(), l.LogStartOffset())
	}
	if _, err := l.Read(l.LogStartOffset(), 100, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
}

func TestLogOffsetForTimestamp(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	for i := 0; i < 100; i++ {
		b := record.NewBuilder(record.None)
		b.Append(int64(i*10), nil, []byte("x"), nil)
		b.Append(int64(i*10+5), nil, []byte("y"), nil) // offset 2i+1 has ts 10i+5
		mustAppend(t, l, b.Build(), 0)
	}
	cases := []struct {
		ts, off, at int64
		found       bool
	}{{0, 0, 0, true}, {3, 1, 5, true}, {5, 1, 5, true}, {6, 2, 10, true}, {500, 100, 500, true}, {995, 199, 995, true}, {996, 0, 0, false}}
	for _, c := range cases {
		off, at, found, err := l.OffsetForTimestamp(c.ts)
		if err != nil || found != c.found || (found && (off != c.off || at != c.at)) {
			t.Errorf("ts %d: got %d %d %v %v, want %d %d %v", c.ts, off, at, found, err, c.off, c.at, c.found)
		}
	}
	if off, _, _, _ := l.OffsetForTimestamp(-1); off != 200 {
		t.Fatalf("latest %d", off)
	}
}

func TestLogFlushAdvancesRecoveryPoint(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.FlushMessages = 10
	l := openTest(t, t.TempDir(), cfg, 0)
	defer l.Close()
	mustAppend(t, l, makeBatch(5, 1, 1), 0)
	if l.RecoveryPoint() != 0 {
		t.Fatalf("rp %d", l.RecoveryPoint())
	}
	mustAppend(t, l, makeBatch(5, 1, 1), 0)
	if l.RecoveryPoint() != 10 {
		t.Fatalf("rp %d after flush.messages", l.RecoveryPoint())
	}
	mustAppend(t, l, makeBatch(1, 1, 1), 0)
	if err := l.Flush(); err != nil || l.RecoveryPoint() != 11 {
		t.Fatalf("rp %d %v", l.RecoveryPoint(), err)
	}
	mustAppend(t, l, makeBatch(1, 1, 1), 0)
	if err := l.Roll(); err != nil || l.NumSegments() != 2 {
		t.Fatalf("roll: segs %d %v", l.NumSegments(), err)
	}
	// The rolled segment is fsynced in the background; the recovery point
	// reaches the roll once that is done.
	waitRecoveryPoint(t, l, 12)
}

func waitRecoveryPoint(t *testing.T, l *Log, want int64) {
	t.Helper()
	l.appendMu.Lock()
	l.flushWG.Wait()
	l.appendMu.Unlock()
	if rp := l.RecoveryPoint(); rp != want {
		t.Fatalf("recovery point %d, want %d", rp, want)
	}
}

func TestLogIOErrorFailsLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	efs := NewErrorFS(OSFS{})
	efs.Torn = true
	l, err := OpenLog(dir, "t", 0, smallConfig(), 0, Options{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, makeBatch(3, 10, 1), 0)
	efs.SetInjector(func(op Op, path string) error {
		if op == OpWrite && filepath.Ext(path) == ".log" {
			return ErrInjected
		}
		return nil
	})
	if _, err := l.AppendAsLeader(makeBatch(3, 100, 1), 0); !errors.Is(err, ErrInjected) || !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append: %v", err)
	}
	efs.SetInjector(nil)
	if _, err := l.AppendAsLeader(makeBatch(3, 10, 1), 0); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append after failure: %v", err)
	}
	if l.LogEndOffset() != 3 || len(readAll(t, l)) != 1 {
		t.Fatal("failed append visible")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, smallConfig(), 0)
	defer l.Close()
	if l.LogEndOffset() != 3 {
		t.Fatalf("leo %d after reopen", l.LogEndOffset())
	}
	mustAppend(t, l, makeBatch(3, 10, 1), 0)
}

func TestLogConcurrentReaders(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	cfg.SegmentBytes = 64 << 10
	l := openTest(t, t.TempDir(), cfg, 0)
	defer l.Close()
	const total = 400
	var wg sync.WaitGroup
	done := make(chan struct{})
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(0)
			for {
				res, err := l.Read(off, 4096, math.MaxInt64)
				if err != nil {
					t.Error(err)
					return
				}
				if err := record.SplitBatches(res.Batches, func(b []byte, h record.Header) error {
					if h.BaseOffset != off {
						t.Errorf("batch at %d, want %d", h.BaseOffset, off)
					}
					off = h.NextOffset()
					return nil
				}); err != nil {
					t.Error(err)
					return
				}
				if off == int64(total*2) {
					return
				}
				if len(res.Batches) == 0 {
					select {
					case <-done:
						if off < l.LogEndOffset() {
							continue
						}
						t.Errorf("reader stopped at %d", off)
						return
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < total; i++ {
		mustAppend(t, l, makeBatch(2, 100, int64(i)), 0)
		if i%50 == 0 {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	wg.Wait()
}

func TestIndexCorruptionNeverCrashesStartup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := smallConfig()
	l := openTest(t, dir, cfg, 0)
	for i := 0; i < 60; i++ {
		mustAppend(t, l, makeBatch(2, 60, int64(i)), 0)
	}
	want := readAll(t, l)
	l.Close()
	idx, _ := filepath.Glob(filepath.Join(dir, "*index"))
	for i, p := range idx {
		data, _ := os.ReadFile(p)
		switch i % 4 {
		case 0:
			data = append(data, 1, 2, 3)
		case 1:
			for j := range data {
				data[j] ^= 0x55
			}
		case 2:
			if len(data) >= 8 {
				binary.BigEndian.PutUint32(data[len(data)-4:], 7) // plausible but wrong position
			}
		case 3:
			data = nil
		}
		os.WriteFile(p, data, 0o644)
	}
	l = openTest(t, dir, cfg, math.MaxInt64)
	defer l.Close()
	got := readAll(t, l)
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
}

func TestSegmentNames(t *testing.T) {
	t.Parallel()
	if segmentName(42) != "00000000000000000042" {
		t.Fatal(segmentName(42))
	}
	if b, ok := parseSegmentName("00000000000000000042.log", ".log"); !ok || b != 42 {
		t.Fatal(b, ok)
	}
	if _, ok := parseSegmentName("42.log", ".log"); ok {
		t.Fatal("short name accepted")
	}
}

func TestLogStaleEpochRejected(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	mustAppend(t, l, makeBatch(1, 1, 1), 5)
	if _, err := l.AppendAsLeader(makeBatch(1, 1, 1), 4); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	if l.LogEndOffset() != 1 {
		t.Fatal("stale append changed the log")
	}
}

// blockSyncOf returns an ErrorFS whose fsyncs of the given segment's log
// file wait until release is closed, then return err.
func blockSyncOf(base int64, release <-chan struct{}, err error) *ErrorFS {
	efs := NewErrorFS(noSyncFS{})
	name := segmentName(base) + logSuffix
	efs.SetInjector(func(op Op, path string) error {
		if op == OpSync && filepath.Base(path) == name {
			<-release
			return err
		}
		return nil
	})
	return efs
}

// TestRollFsyncsInBackground: rolling does not wait for the old segment's
// fsync; appends go on meanwhile, the recovery point moves only once the
// fsync is done, and Close waits for it.
func TestRollFsyncsInBackground(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	l, err := OpenLog(t.TempDir(), "t", 0, smallConfig(), 0, Options{FS: blockSyncOf(0, release, nil)})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, makeBatch(3, 10, 1), 0)
	done := make(chan error)
	go func() { done <- l.Roll() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("roll waits for the fsync of the old segment")
	}
	mustAppend(t, l, makeBatch(2, 10, 1), 0)
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d before the rolled segment is fsynced", rp)
	}
	go func() { done <- l.Close() }()
	select {
	case <-done:
		t.Fatal("close does not wait for the background fsync")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rp := l.RecoveryPoint(); rp != 5 {
		t.Fatalf("recovery point %d after close, want 5", rp)
	}
}

// TestRollFsyncErrorFailsLog: a failed background fsync fails the log and
// leaves the recovery point where it was.
func TestRollFsyncErrorFailsLog(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	close(release)
	l, err := OpenLog(t.TempDir(), "t", 0, smallConfig(), 0, Options{FS: blockSyncOf(0, release, ErrInjected)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, makeBatch(3, 10, 1), 0)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); !errors.Is(err, ErrLogFailed) || !errors.Is(err, ErrInjected) {
		t.Fatalf("flush after failed background fsync: %v", err)
	}
	if _, err := l.AppendAsLeader(makeBatch(1, 1, 1), 0); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("append after failed background fsync: %v", err)
	}
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d after a failed fsync", rp)
	}
}

// TestTruncateWaitsForRollFsync: a background fsync finishing after a
// truncation must not move the recovery point past the new log end (over
// offsets appended later and never fsynced).
func TestTruncateWaitsForRollFsync(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	l, err := OpenLog(t.TempDir(), "t", 0, smallConfig(), 0, Options{FS: blockSyncOf(0, release, nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, makeBatch(3, 10, 1), 0)
	mustAppend(t, l, makeBatch(3, 10, 1), 0)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(20*time.Millisecond, func() { close(release) })
	if err := l.Truncate(3); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, makeBatch(3, 10, 1), 0)
	l.appendMu.Lock()
	l.flushWG.Wait()
	l.appendMu.Unlock()
	if rp := l.RecoveryPoint(); rp > 3 {
		t.Fatalf("recovery point %d covers offsets appended after truncating to 3", rp)
	}
}

// TestReadRetriesAfterTruncation: a read that overlaps a truncation (and
// appends after it) must not come back empty below the log end, nor with
// bytes from before the cut: it reads again.
func TestReadRetriesAfterTruncation(t *testing.T) {
	t.Parallel()
	for _, newBatch := range [][]byte{makeBatch(1, 10, 7), makeBatch(3, 200, 7)} {
		efs := NewErrorFS(newMemFS())
		l, err := OpenLog("/d/t-0", "t", 0, smallConfig(), 0, Options{FS: efs})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, makeBatch(3, 10, 1), 0) // offsets 0-2
		mustAppend(t, l, makeBatch(3, 10, 2), 0) // offsets 3-5
		var reads atomic.Int32
		blocked, release := make(chan struct{}), make(chan struct{})
		efs.SetInjector(func(op Op, path string) error {
			// The reader's second read of the log is the batch read (after
			// the header read at 3, where its append put it: see
			// recentBatches): hold it there.
			if op == OpRead && filepath.Ext(path) == logSuffix && reads.Add(1) == 2 {
				close(blocked)
				<-release
			}
			return nil
		})
		type result struct {
			res ReadResult
			err error
		}
		done := make(chan result)
		go func() {
			res, err := l.Read(3, 1<<16, math.MaxInt64)
			done <- result{res, err}
		}()
		<-blocked
		if err := l.Truncate(3); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, newBatch, 0)
		close(release)
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !bytes.Equal(r.res.Batches, newBatch) || r.res.HighOffset != l.LogEndOffset() {
			t.Fatalf("read at 3 after truncation: %d bytes up to %d, want the new batch (%d bytes) up to %d",
				len(r.res.Batches), r.res.HighOffset, len(newBatch), l.LogEndOffset())
		}
		l.Close()
	}
}

// TestReadRacingClose: a reader that passed the closed check just before
// Close released the segments gets ErrClosed, not a read from a closed
// file (and does not close the files a second time).
func TestReadRacingClose(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	mustAppend(t, l, makeBatch(3, 10, 1), 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.closedFlag.Store(false) // as seen by a reader that checked earlier
	if _, err := l.Read(0, 1<<10, math.MaxInt64); !errors.Is(err, ErrClosed) {
		t.Fatalf("read racing close: %v", err)
	}
	if _, _, _, err := l.OffsetForTimestamp(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("timestamp lookup racing close: %v", err)
	}
}

// twoRecordBatch is an uncompressed batch of two records (keys "k0" and
// "k1", value "v") and the position in it of the second record, laid out
// as length, attributes, timestamp delta, offset delta, key length, key,
// value length, value, header count (one byte each but the key).
func twoRecordBatch(t *testing.T) (batch []byte, second int) {
	t.Helper()
	b := record.NewBuilder(record.None)
	b.Append(1000, []byte("k0"), []byte("v"), nil)
	b.Append(1000, []byte("k1"), []byte("v"), nil)
	batch = b.Build()
	second = record.HeaderSize + 10 // the first record: length 9, 9 bytes
	if batch[second] != 18 || batch[second+3] != 2 || batch[second+4] != 4 {
		t.Fatalf("unexpected layout % x", batch[second:])
	}
	return batch, second
}

// TestLogAppendRejectsMalformedRecords: a leader append parses every
// record of an uncompressed batch, as Kafka's does, so a batch with a
// valid CRC and record framing but a record consumers cannot decode, or
// one with offsets outside the batch's range, is refused as corrupt
// rather than stored as a poison pill.
func TestLogAppendRejectsMalformedRecords(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		mut  func(b []byte, r int)
	}{
		{"offset delta outside the batch", func(b []byte, r int) { b[r+3] = 14 }}, // 7
		{"offset delta of the first record", func(b []byte, r int) { b[record.HeaderSize+3] = 2 }},
		{"key past the record", func(b []byte, r int) { b[r+4] = 100 }}, // 50
		{"key length below -1", func(b []byte, r int) { b[r+4] = 3 }},   // -2
		{"key length short", func(b []byte, r int) { b[r+4] = 2 }},      // 1: a byte left over
		{"value past the record", func(b []byte, r int) { b[r+7] = 6 }},
		{"header count past the record", func(b []byte, r int) { b[r+9] = 2 }},
		{"header count negative", func(b []byte, r int) { b[r+9] = 1 }},
		{"timestamp delta past the record", func(b []byte, r int) { copy(b[r+2:r+10], []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := openTest(t, t.TempDir(), smallConfig(), 0)
			defer l.Close()
			batch, r := twoRecordBatch(t)
			c.mut(batch, r)
			binary.BigEndian.PutUint32(batch[17:], record.CRC(batch))
			if _, err := record.Validate(batch); err != nil {
				t.Fatalf("the framing check should pass: %v", err)
			}
			_, err := l.AppendAsLeader(batch, 0)
			if !errors.Is(err, ErrCorruptBatch) || !errors.Is(err, record.ErrCorrupt) {
				t.Fatalf("AppendAsLeader: got %v, want a corrupt batch error", err)
			}
			if l.LogEndOffset() != 0 || l.Size() != 0 {
				t.Fatalf("log changed: leo %d size %d", l.LogEndOffset(), l.Size())
			}
			good, _ := twoRecordBatch(t)
			if _, err := l.AppendAsLeader(good, 0); err != nil {
				t.Fatal(err)
			}
			n := 0
			if err := record.ForEachRecord(readAll(t, l)[0], func(*record.Record) error { n++; return nil }); err != nil || n != 2 {
				t.Fatalf("decoding the log: %d records, %v", n, err)
			}
		})
	}
}

// TestLogReadWaitsForTruncation: a read (or a timestamp lookup) that
// starts while a truncation is under way, before it has published the new
// log end, waits for it and returns nothing of what it cuts.
func TestLogReadWaitsForTruncation(t *testing.T) {
	t.Parallel()
	efs := NewErrorFS(newMemFS())
	l, err := OpenLog("/d/t-0", "t", 0, smallConfig(), 0, Options{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, makeBatch(3, 10, 1), 0) // offsets 0-2
	mustAppend(t, l, makeBatch(3, 10, 2), 0) // offsets 3-5

	var armed atomic.Bool
	blocked, release := make(chan struct{}), make(chan struct{})
	efs.SetInjector(func(op Op, path string) error {
		// Hold the truncation in its first log read (locating the cut),
		// after it began and before it publishes the new log end.
		if op == OpRead && filepath.Ext(path) == logSuffix && armed.CompareAndSwap(true, false) {
			close(blocked)
			<-release
		}
		return nil
	})
	waiting := make(chan struct{}, 2)
	l.readWaitHook = func() { waiting <- struct{}{} }
	armed.Store(true)
	truncated := make(chan error)
	go func() { truncated <- l.Truncate(3) }()
	<-blocked

	type result struct {
		res ReadResult
		err error
	}
	done := make(chan result)
	go func() {
		res, err := l.Read(3, 1<<16, math.MaxInt64) // starts inside the window
		done <- result{res, err}
	}()
	select {
	case <-waiting: // the read waits for the truncation
	case r := <-done:
		close(release)
		t.Fatalf("read at 3 did not wait for Truncate(3): %d bytes up to offset %d, %v", len(r.res.Batches), r.res.HighOffset, r.err)
	}
	type lookup struct {
		off   int64
		found bool
		err   error
	}
	looked := make(chan lookup)
	go func() {
		off, _, found, err := l.OffsetForTimestamp(2) // the cut batch's records
		looked <- lookup{off, found, err}
	}()
	select {
	case <-waiting:
	case r := <-looked:
		close(release)
		t.Fatalf("timestamp lookup did not wait for Truncate(3): offset %d found %v, %v", r.off, r.found, r.err)
	}
	close(release)
	if r := <-looked; r.err != nil || r.found {
		t.Fatalf("timestamp lookup racing Truncate(3): offset %d found %v, %v; want not found", r.off, r.found, r.err)
	}
	if err := <-truncated; err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if l.LogEndOffset() != 3 {
		t.Fatalf("log end %d after truncating to 3", l.LogEndOffset())
	}
	if len(r.res.Batches) > 0 || r.res.LogEndOffset != 3 || r.res.HighOffset != 3 {
		t.Fatalf("read at 3 racing Truncate(3) returned %d bytes up to offset %d (log end %d), want nothing at log end 3",
			len(r.res.Batches), r.res.HighOffset, r.res.LogEndOffset)
	}
}

// TestLogReadAfterFailedTruncation: a truncation that fails before it
// publishes the new log end does not leave reads waiting for it.
func TestLogReadAfterFailedTruncation(t *testing.T) {
	t.Parallel()
	efs := NewErrorFS(newMemFS())
	l, err := OpenLog("/d/t-0", "t", 0, smallConfig(), 0, Options{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, makeBatch(3, 10, 1), 0)
	mustAppend(t, l, makeBatch(3, 10, 2), 0)
	ioErr := errors.New("injected")
	var armed atomic.Bool
	armed.Store(true)
	efs.SetInjector(func(op Op, path string) error {
		if op == OpRead && filepath.Ext(path) == logSuffix && armed.CompareAndSwap(true, false) {
			return ioErr
		}
		return nil
	})
	if err := l.Truncate(3); !errors.Is(err, ioErr) {
		t.Fatalf("truncate: %v", err)
	}
	res, err := l.Read(0, 1<<16, math.MaxInt64)
	if err != nil || res.HighOffset != 6 {
		t.Fatalf("read after a failed truncation: up to %d, %v", res.HighOffset, err)
	}
}

// TestLogAssignEpochStart: a new leader's epoch starts at the log end
// before it appends (followers' divergence checks see it), survives a
// reopen, and a truncation at the log end drops it again (a replica that
// led without appending, then follows).
func TestLogAssignEpochStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTest(t, dir, smallConfig(), 0)
	mustAppend(t, l, makeBatch(5, 1, 1), 2) // 0-4 epoch 2
	if err := l.AssignEpochStart(5); err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpochStart(3); err != nil { // older: ignored
		t.Fatal(err)
	}
	if e, ok := l.LatestEpoch(); !ok || e != 5 {
		t.Fatalf("latest epoch %d", e)
	}
	if e, o := l.EndOffsetForEpoch(2); e != 2 || o != 5 {
		t.Fatalf("epoch 2 ends at %d (%d), want 5", o, e)
	}
	if e, o := l.EndOffsetForEpoch(5); e != 5 || o != 5 {
		t.Fatalf("epoch 5: %d %d", e, o)
	}
	info := mustAppend(t, l, makeBatch(2, 1, 1), 5)
	if info.FirstOffset != 5 {
		t.Fatalf("append at %d", info.FirstOffset)
	}
	if err := l.AssignEpochStart(6); err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if e, _ := l.LatestEpoch(); e != 5 || l.LogEndOffset() != 7 {
		t.Fatalf("after truncating at the log end: epoch %d, leo %d", e, l.LogEndOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openTest(t, dir, smallConfig(), 0)
	defer l2.Close()
	if e, o := l2.EndOffsetForEpoch(2); e != 2 || o != 5 {
		t.Fatalf("after reopen epoch 2 ends at %d (%d)", o, e)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l2.AssignEpochStart(9); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed log: %v", err)
	}
}
