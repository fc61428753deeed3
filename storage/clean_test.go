package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quirelog/quire/internal/testdepth"
	"github.com/quirelog/quire/record"
)

// cRec is a record as the compaction model knows it.
type cRec struct {
	offset  int64
	key     []byte // nil: no key
	value   []byte // nil: a tombstone
	ts      int64
	headers []record.RecordHeader
}

func (r cRec) String() string {
	return fmt.Sprintf("@%d %q=%q ts %d", r.offset, r.key, r.value, r.ts)
}

func sameRec(a, b cRec) bool {
	if a.offset != b.offset || !bytes.Equal(a.key, b.key) || (a.key == nil) != (b.key == nil) ||
		!bytes.Equal(a.value, b.value) || (a.value == nil) != (b.value == nil) || a.ts != b.ts ||
		len(a.headers) != len(b.headers) {
		return false
	}
	for i := range a.headers {
		if a.headers[i].Key != b.headers[i].Key || !bytes.Equal(a.headers[i].Value, b.headers[i].Value) {
			return false
		}
	}
	return true
}

func compactConfig() LogConfig {
	c := smallConfig()
	c.Compact, c.Delete = true, false
	c.SegmentBytes = 1500
	c.IndexIntervalBytes = 128
	c.MinCleanableDirtyRatio = 0
	c.DeleteRetentionMs = 1000
	c.MinCompactionLagMs = 300
	return c
}

// readLogRecords reads the whole log from its start as a consumer would,
// from each batch to the offset after it (gaps allowed), checking every
// batch, and returns its records and batch headers.
func readLogRecords(t testing.TB, l *Log) ([]cRec, []record.Header) {
	t.Helper()
	var recs []cRec
	var hs []record.Header
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		res, err := l.Read(off, 1<<12, math.MaxInt64)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Batches) == 0 {
			t.Fatalf("empty read at %d below the log end %d", off, l.LogEndOffset())
		}
		err = record.SplitBatches(res.Batches, func(b []byte, h record.Header) error {
			if h.LastOffset() < off {
				return fmt.Errorf("batch [%d, %d] read at %d", h.BaseOffset, h.LastOffset(), off)
			}
			if len(hs) > 0 && h.BaseOffset <= hs[len(hs)-1].LastOffset() {
				return fmt.Errorf("batch at %d after one ending at %d", h.BaseOffset, hs[len(hs)-1].LastOffset())
			}
			hs = append(hs, h)
			prev := int64(-1)
			err := record.ForEachRecord(b, func(r *record.Record) error {
				if r.Offset <= prev || r.Offset > h.LastOffset() {
					return fmt.Errorf("record offset %d in batch [%d, %d] after %d", r.Offset, h.BaseOffset, h.LastOffset(), prev)
				}
				prev = r.Offset
				c := cRec{offset: r.Offset, ts: r.Timestamp}
				if r.Key != nil {
					c.key = append([]byte{}, r.Key...)
				}
				if r.Value != nil {
					c.value = append([]byte{}, r.Value...)
				}
				for _, rh := range r.Headers {
					c.headers = append(c.headers, record.RecordHeader{Key: rh.Key, Value: append([]byte(nil), rh.Value...)})
				}
				recs = append(recs, c)
				return nil
			})
			off = h.NextOffset()
			return err
		})
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if res.HighOffset != off {
			t.Fatalf("high offset %d, want %d", res.HighOffset, off)
		}
	}
	return recs, hs
}

// checkSegmentIndexes checks every index entry of every segment against
// the batch it names.
func checkSegmentIndexes(t testing.TB, l *Log) {
	t.Helper()
	l.mu.RLock()
	segs := append([]*segment(nil), l.segs...)
	l.mu.RUnlock()
	for i, s := range segs {
		var hb [record.HeaderSize]byte
		limit := s.size.Load()
		for e := 0; e < s.idx.entries(); e++ {
			off, pos := s.idx.entry(e)
			h, err := s.readHeader(pos, limit, &hb)
			if err != nil || h.BaseOffset != off {
				t.Fatalf("segment %d: index entry (%d, %d) points at %+v, %v", s.base, off, pos, h, err)
			}
		}
		maxTs := map[int64]int64{}
		if _, err := s.scanHeaders(0, limit, func(h *record.Header, _ int64) {
			if h.BaseOffset < s.base || (i+1 < len(segs) && h.LastOffset() >= segs[i+1].base) {
				t.Fatalf("segment %d holds batch [%d, %d]", s.base, h.BaseOffset, h.LastOffset())
			}
			maxTs[h.BaseOffset] = h.MaxTimestamp
		}); err != nil {
			t.Fatalf("segment %d: %v", s.base, err)
		}
		for e := 0; e < s.tidx.entries(); e++ {
			ts, off := s.tidx.entry(e)
			if m, ok := maxTs[off]; !ok || m != ts {
				t.Fatalf("segment %d: time index entry (%d, %d) but batch %d has max timestamp %d (%v)", s.base, ts, off, off, m, ok)
			}
		}
	}
}

// compactModel is what was written to a compacted log.
type compactModel struct {
	written []cRec           // every record, by offset
	byKey   map[string][]int // indexes into written, per key
	cfg     LogConfig
	// cleanedTo is the highest clean point a pass reached (a log opened
	// alone, without its Manager's checkpoint, starts all dirty again).
	cleanedTo int64
	// marks are the clean points reached, with when (Unix ms): a
	// tombstone may go once it lies below one reached more than
	// delete.retention.ms ago.
	marks []cleanMark
}

func (m *compactModel) add(r cRec) {
	m.written = append(m.written, r)
	if r.key != nil {
		m.byKey[string(r.key)] = append(m.byKey[string(r.key)], len(m.written)-1)
	}
}

// check holds the log l (whose clean pass, if any, ran at cleanedAt)
// against the model: every record read is one written, unchanged; the
// latest record of every key is there, unless it is a tombstone cleaned
// first more than delete.retention.ms ago; a record is gone only if a later one of its key
// lies below the clean point or it is such a tombstone; a record younger
// than min.compaction.lag.ms at the last clean is there; reads at every
// offset start at the right batch; the indexes point at their batches.
func (m *compactModel) check(t *testing.T, l *Log, nowMs, lastCleanMs int64, what string) {
	t.Helper()
	recs, hs := readLogRecords(t, l)
	present := map[int64]bool{}
	i := 0
	for _, r := range recs {
		for i < len(m.written) && m.written[i].offset < r.offset {
			i++
		}
		if i == len(m.written) || !sameRec(m.written[i], r) {
			t.Fatalf("%s: read %v, not what was written there", what, r)
		}
		present[r.offset] = true
	}
	if p := l.CleanPoint(); p > m.cleanedTo {
		m.cleanedTo = p
		m.marks = append(m.marks, cleanMark{p, nowMs})
	}
	cp := m.cleanedTo
	for _, w := range m.written {
		if present[w.offset] {
			continue
		}
		idx := m.byKey[string(w.key)]
		latest := m.written[idx[len(idx)-1]]
		supersededBelowClean := false
		for _, j := range idx {
			if o := m.written[j].offset; o > w.offset && o < cp {
				supersededBelowClean = true
			}
		}
		oldTombstone := false
		for _, mk := range m.marks {
			if w.value == nil && w.offset < mk.point && nowMs-mk.ms > m.cfg.DeleteRetentionMs {
				oldTombstone = true
			}
		}
		switch {
		case w.key == nil:
			t.Fatalf("%s: keyless record %v written", what, w)
		case latest.offset == w.offset && !oldTombstone:
			t.Fatalf("%s: the latest record of key %q, %v, is gone (clean point %d)", what, w.key, w, cp)
		case !supersededBelowClean && !oldTombstone:
			t.Fatalf("%s: %v is gone, but no later record of its key is below the clean point %d", what, w, cp)
		case lastCleanMs-w.ts < m.cfg.MinCompactionLagMs:
			t.Fatalf("%s: %v is gone, younger than min.compaction.lag.ms at the last clean (%d)", what, w, lastCleanMs)
		}
	}
	// A read at any offset starts with the first batch ending at or
	// after it: a fetch at an offset cleaned away gets the next batch.
	for k := 0; k < 30 && len(hs) > 0; k++ {
		off := l.LogStartOffset() + rand.Int63n(max(l.LogEndOffset()-l.LogStartOffset(), 1))
		res, err := l.Read(off, 1, math.MaxInt64)
		if err != nil {
			t.Fatalf("%s: read at %d: %v", what, off, err)
		}
		want := -1
		for j, h := range hs {
			if h.LastOffset() >= off {
				want = j
				break
			}
		}
		if want < 0 {
			if len(res.Batches) != 0 {
				t.Fatalf("%s: read at %d past the last batch returned data", what, off)
			}
			continue
		}
		h, err := record.ParseHeader(res.Batches)
		if err != nil || h.BaseOffset != hs[want].BaseOffset {
			t.Fatalf("%s: read at %d starts at batch %d (%v), want %d", what, off, h.BaseOffset, err, hs[want].BaseOffset)
		}
	}
	// ListOffsets by timestamp: the first record present at or after ts.
	for k := 0; k < 10 && len(recs) > 0; k++ {
		ts := recs[rand.Intn(len(recs))].ts - int64(rand.Intn(3))
		off, _, found, err := l.OffsetForTimestamp(ts)
		if err != nil {
			t.Fatalf("%s: offset for timestamp %d: %v", what, ts, err)
		}
		want := int64(-1)
		for _, r := range recs {
			if r.ts >= ts {
				want = r.offset
				break
			}
		}
		if (want >= 0) != found || (found && off != want) {
			t.Fatalf("%s: offset for timestamp %d = %d (%v), want %d", what, ts, off, found, want)
		}
	}
	checkSegmentIndexes(t, l)
}

// TestLogCleanModel writes random keys, values, tombstones and headers
// at random times (an injected clock), with idempotent producers among
// them, cleans with offset maps of random sizes (so that passes often
// map only a prefix of the dirty section), reopens, and checks the log
// against the model after each step.
func TestLogCleanModel(t *testing.T) {
	t.Parallel()
	seeds := testdepth.Rounds(8, 3)
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runCleanModel(t, seed) })
	}
}

func runCleanModel(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	cfg := compactConfig()
	cfg.SegmentBytes = int64(600 + rng.Intn(2000))
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	open := func() *Log {
		l, err := OpenLog(dir, "t", 0, cfg, 0, Options{FS: noSyncFS{}, Now: clock.Now})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		l.SetHighWatermark(l.LogEndOffset())
		return l
	}
	l := open()
	defer func() { l.Close() }()
	m := &compactModel{byKey: map[string][]int{}, cfg: cfg}
	keys := 5 + rng.Intn(40)
	type prod struct {
		id   int64
		seq  int32
		last []byte // its last batch as appended, for a retry
		info AppendInfo
	}
	prods := []*prod{{id: 7}, {id: 8}}
	lastClean := int64(0)
	for step := 0; step < 400; step++ {
		now := clock.t.UnixMilli()
		what := fmt.Sprintf("seed %d step %d", seed, step)
		switch op := rng.Intn(100); {
		case op < 60:
			codec := record.Codec(rng.Intn(5))
			b := record.NewBuilder(codec)
			n := 1 + rng.Intn(5)
			var recs []cRec
			for j := 0; j < n; j++ {
				r := cRec{key: []byte(fmt.Sprintf("key-%d", rng.Intn(keys))), ts: now - int64(rng.Intn(200))}
				if rng.Intn(6) != 0 {
					r.value = []byte(fmt.Sprintf("v%d-%d-%s", step, j, strings.Repeat("x", rng.Intn(60))))
				}
				if rng.Intn(4) == 0 {
					r.headers = []record.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(step))}}
				}
				b.Append(r.ts, r.key, r.value, r.headers)
				recs = append(recs, r)
			}
			var p *prod
			if rng.Intn(3) == 0 {
				p = prods[rng.Intn(len(prods))]
				b.SetProducer(p.id, 0, p.seq)
			}
			batch := b.Build()
			info := mustAppend(t, l, batch, 0)
			if p != nil {
				p.seq += int32(n)
				p.last, p.info = batch, info
			}
			for j := range recs {
				recs[j].offset = info.FirstOffset + int64(j)
				m.add(recs[j])
			}
			l.SetHighWatermark(l.LogEndOffset())
		case op < 62:
			// A keyless record is refused by a compacted log.
			b := record.NewBuilder(record.None)
			b.Append(now, nil, []byte("v"), nil)
			if _, err := l.AppendAsLeader(b.Build(), 0); !errors.Is(err, ErrNoKey) {
				t.Fatalf("%s: keyless record: %v, want ErrNoKey", what, err)
			}
		case op < 75:
			clock.t = clock.t.Add(time.Duration(rng.Intn(400)) * time.Millisecond)
		case op < 80:
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		case op < 93:
			mapBytes := int64(16+rng.Intn(200)) * offsetMapSlotBytes
			if rng.Intn(2) == 0 {
				mapBytes = 1 << 20
			}
			if _, err := l.clean(newOffsetMap(mapBytes), nil); err != nil {
				t.Fatalf("%s: clean: %v", what, err)
			}
			lastClean = now
			m.check(t, l, now, lastClean, what+" (after clean)")
		case op < 97:
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if rng.Intn(2) == 0 {
				// Without producer snapshots the producers' state is
				// rebuilt from the batches: their last ones must be there.
				names, _ := os.ReadDir(dir)
				for _, e := range names {
					if strings.HasSuffix(e.Name(), ".snapshot") {
						os.Remove(filepath.Join(dir, e.Name()))
					}
				}
			}
			l = open()
			m.check(t, l, now, lastClean, what+" (after reopen)")
		default:
			// A retry of a producer's last batch is still known as one.
			p := prods[rng.Intn(len(prods))]
			if p.last == nil {
				continue
			}
			retry := append([]byte(nil), p.last...)
			info, err := l.AppendAsLeader(retry, 0)
			if err != nil || !info.Duplicate || info.FirstOffset != p.info.FirstOffset {
				t.Fatalf("%s: retry of producer %d's last batch: %+v, %v; first appended at %d", what, p.id, info, err, p.info.FirstOffset)
			}
		}
	}
	m.check(t, l, clock.t.UnixMilli(), lastClean, "end")
	// Everything cleanable at the end: a final clean far in the future,
	// and another delete.retention.ms after it (a tombstone goes only
	// that long after its first clean), leave one record per live key
	// and no tombstone.
	clock.t = clock.t.Add(time.Hour)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.clean(newOffsetMap(1<<20), nil); err != nil {
		t.Fatal(err)
	}
	m.check(t, l, clock.t.UnixMilli(), clock.t.UnixMilli(), "final, first pass")
	b := record.NewBuilder(record.None)
	b.Append(clock.t.UnixMilli(), []byte("final-key"), []byte("final"), nil)
	info := mustAppend(t, l, b.Build(), 0)
	m.add(cRec{offset: info.FirstOffset, key: []byte("final-key"), value: []byte("final"), ts: clock.t.UnixMilli()})
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(time.Hour)
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.clean(newOffsetMap(1<<20), nil); err != nil {
		t.Fatal(err)
	}
	m.check(t, l, clock.t.UnixMilli(), clock.t.UnixMilli(), "final")
	recs, _ := readLogRecords(t, l)
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[string(r.key)] || r.value == nil {
			t.Fatalf("after a full clean: %v (key seen before: %v)", r, seen[string(r.key)])
		}
		seen[string(r.key)] = true
	}
	for k, idx := range m.byKey {
		if last := m.written[idx[len(idx)-1]]; last.value != nil && !seen[k] {
			t.Fatalf("after a full clean: key %q missing", k)
		}
	}
}

// Small segments left by cleaning merge: a log of many one-batch
// segments whose keys are all overwritten comes out of a pass in a few
// segments, holding one record per key.
func TestLogCleanMergesSmallSegments(t *testing.T) {
	t.Parallel()
	cfg := compactConfig()
	cfg.SegmentBytes = 8192 // the 60 segments' sizes add up to less
	cfg.MinCompactionLagMs = 0
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	l, err := OpenLog(t.TempDir(), "t", 0, cfg, 0, Options{FS: noSyncFS{}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 60; i++ {
		b := record.NewBuilder(record.None)
		b.Append(clock.t.UnixMilli(), []byte(fmt.Sprint("k", i%5)), []byte(fmt.Sprint("v", i)), nil)
		mustAppend(t, l, b.Build(), 0)
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(l.LogEndOffset())
	before := l.NumSegments()
	st, err := l.clean(newOffsetMap(1<<20), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.SegmentsIn != before-1 || st.SegmentsOut != 1 || l.NumSegments() != 2 {
		t.Fatalf("%d segments before, %+v, %d after", before, st, l.NumSegments())
	}
	recs, _ := readLogRecords(t, l)
	if len(recs) != 5 {
		t.Fatalf("%d records after the clean: %v", len(recs), recs)
	}
	for i, r := range recs {
		if want := fmt.Sprint("v", 55+i); string(r.value) != want || r.offset != int64(55+i) {
			t.Fatalf("record %d: %v, want %s at %d", i, r, want, 55+i)
		}
	}
	checkSegmentIndexes(t, l)
}

// max.compaction.lag.ms: a compacted log's active segment rolls at that
// age, and a log whose dirty section holds a record that old needs
// cleaning whatever its dirty ratio; before, with a ratio it cannot
// reach, it does not.
func TestLogCleanMaxCompactionLag(t *testing.T) {
	t.Parallel()
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.MinCleanableDirtyRatio = 1 // never by ratio alone
	cfg.MinCompactionLagMs = 0
	cfg.MaxCompactionLagMs = 1000
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	l, err := OpenLog(t.TempDir(), "t", 0, cfg, 0, Options{FS: noSyncFS{}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendAt := func() {
		b := record.NewBuilder(record.None)
		b.Append(clock.t.UnixMilli(), []byte("k"), []byte("v"), nil)
		mustAppend(t, l, b.Build(), 0)
		l.SetHighWatermark(l.LogEndOffset())
	}
	appendAt()
	clock.t = clock.t.Add(600 * time.Millisecond)
	appendAt()
	if n := l.NumSegments(); n != 1 {
		t.Fatalf("%d segments before max.compaction.lag.ms", n)
	}
	if _, _, ok := l.cleanPriority(); ok {
		t.Fatal("a log with nothing cleanable needs cleaning")
	}
	clock.t = clock.t.Add(600 * time.Millisecond)
	appendAt()
	if n := l.NumSegments(); n != 2 {
		t.Fatalf("%d segments: the active segment did not roll at max.compaction.lag.ms", n)
	}
	ratio, due, ok := l.cleanPriority()
	if !ok || !due || ratio != 1 {
		t.Fatalf("past max.compaction.lag.ms: ratio %v due %v ok %v", ratio, due, ok)
	}
	if _, err := l.clean(newOffsetMap(1<<20), nil); err != nil {
		t.Fatal(err)
	}
	if recs, _ := readLogRecords(t, l); len(recs) != 2 || recs[0].offset != 1 {
		t.Fatalf("after the clean: %v", recs)
	}
	if _, _, ok := l.cleanPriority(); ok {
		t.Fatal("a cleaned log still needs cleaning")
	}
}

// openCompactTest opens a compacted log with an injected clock, cleaning
// every closed segment at once.
func openCompactTest(t *testing.T, clock *fakeClock) *Log {
	t.Helper()
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.MinCompactionLagMs = 0
	l, err := OpenLog(t.TempDir(), "t", 0, cfg, 0, Options{FS: noSyncFS{}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// appendKV appends one record (a tombstone for a nil value) as leader
// and rolls.
func appendKV(t *testing.T, l *Log, ts int64, key string, value []byte) {
	t.Helper()
	b := record.NewBuilder(record.None)
	b.Append(ts, []byte(key), value, nil)
	mustAppend(t, l, b.Build(), 0)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
}

// TestLogCleanTruncationBeforeCleanPoint: a truncation between a pass's
// last swap and its move of the clean point is not undone: the clean
// point stays at or below the new log end, so records appended after it
// are dirty and their keys mapped by the next pass.
func TestLogCleanTruncationBeforeCleanPoint(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	l := openCompactTest(t, clock)
	defer l.Close()
	for i := 0; i < 10; i++ {
		appendKV(t, l, clock.t.UnixMilli(), fmt.Sprint("k", i), []byte("v"))
	}
	l.SetHighWatermark(l.LogEndOffset())
	l.testHookBeforeCleanPoint = func() {
		if err := l.Truncate(2); err != nil {
			t.Error(err)
		}
	}
	_, err := l.clean(newOffsetMap(1<<20), nil)
	if !errors.Is(err, errCleanAborted) {
		t.Fatalf("clean with a truncation before the clean point moved: %v", err)
	}
	if cp, leo := l.CleanPoint(), l.LogEndOffset(); cp > leo {
		t.Fatalf("clean point %d above the log end %d after the truncation", cp, leo)
	}
	l.testHookBeforeCleanPoint = nil
	// A key written twice after the truncation is deduplicated by the
	// next pass: it was dirty.
	appendKV(t, l, clock.t.UnixMilli(), "late", []byte("old"))
	appendKV(t, l, clock.t.UnixMilli(), "late", []byte("new"))
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.clean(newOffsetMap(1<<20), nil); err != nil {
		t.Fatal(err)
	}
	recs, _ := readLogRecords(t, l)
	for _, r := range recs {
		if string(r.key) == "late" && string(r.value) == "old" {
			t.Fatalf("%v survived a later record of its key: %v", r, recs)
		}
	}
}

// TestLogCleanTombstoneRetention: delete.retention.ms counts from when
// a tombstone was first cleaned, not from its timestamp: one with an old
// timestamp survives its first clean and the passes within the
// retention after it, and goes with the first pass after that.
func TestLogCleanTombstoneRetention(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	l := openCompactTest(t, clock)
	defer l.Close()
	retention := l.Config().DeleteRetentionMs
	appendKV(t, l, 1, "k", []byte("v1")) // an old CreateTime
	appendKV(t, l, 1, "k", nil)
	hasTombstone := func() bool {
		recs, _ := readLogRecords(t, l)
		for _, r := range recs {
			if string(r.key) == "k" && r.value != nil {
				t.Fatalf("the value of a deleted key survived: %v", recs)
			}
			if string(r.key) == "k" {
				return true
			}
		}
		return false
	}
	pass := func(key string) {
		t.Helper()
		appendKV(t, l, clock.t.UnixMilli(), key, []byte("x"))
		l.SetHighWatermark(l.LogEndOffset())
		if _, err := l.clean(newOffsetMap(1<<20), nil); err != nil {
			t.Fatal(err)
		}
	}
	pass("a")
	if !hasTombstone() {
		t.Fatal("the tombstone went with its first clean")
	}
	clock.t = clock.t.Add(time.Duration(retention/2) * time.Millisecond)
	pass("b")
	if !hasTombstone() {
		t.Fatal("the tombstone went within delete.retention.ms of its first clean")
	}
	clock.t = clock.t.Add(time.Duration(retention/2+1) * time.Millisecond)
	pass("c")
	if hasTombstone() {
		t.Fatal("the tombstone is still there delete.retention.ms after its first clean")
	}
}

// TestCleanMarksBounded: the clean marks stay bounded however many passes
// run within delete.retention.ms, and thinning them never lets a
// tombstone go sooner: the horizon at any time is at most what the full
// list of marks gives.
func TestCleanMarksBounded(t *testing.T) {
	t.Parallel()
	var c cleanState
	var all []cleanMark
	const retention = 1000
	for i := int64(1); i <= 5000; i++ {
		c.addMarkLocked(i*10, i)
		all = append(all, cleanMark{i * 10, i})
		if len(c.marks) > maxCleanMarks {
			t.Fatalf("%d marks after %d passes", len(c.marks), i)
		}
		if i%97 == 0 {
			now := i + retention/2
			want := int64(-1)
			for _, m := range all {
				if now-m.ms > retention {
					want = max(want, m.point)
				}
			}
			if got := c.deleteHorizonLocked(now, retention); got > want {
				t.Fatalf("horizon %d at %d, the full list gives %d", got, now, want)
			}
		}
	}
}
