package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// marksTest is a compacted log in a Manager with an injected clock, to
// be restarted.
type marksTest struct {
	t     *testing.T
	dir   string
	cfg   LogConfig
	clock *fakeClock
	m     *Manager
	l     *Log
}

func newMarksTest(t *testing.T) *marksTest {
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.MinCompactionLagMs = 0
	mt := &marksTest{t: t, dir: t.TempDir(), cfg: cfg, clock: &fakeClock{t: time.UnixMilli(1_000_000)}}
	mt.open()
	return mt
}

func (mt *marksTest) open() {
	mt.t.Helper()
	m, err := OpenManager(mt.dir, mt.cfg, Options{FS: noSyncFS{}, Now: mt.clock.Now})
	if err != nil {
		mt.t.Fatal(err)
	}
	l, err := m.GetOrCreate("t", 0, mt.cfg)
	if err != nil {
		mt.t.Fatal(err)
	}
	mt.m, mt.l = m, l
}

func (mt *marksTest) restart() {
	mt.t.Helper()
	if err := mt.m.Close(); err != nil {
		mt.t.Fatal(err)
	}
	mt.open()
}

func (mt *marksTest) advance(ms int64) {
	mt.clock.t = mt.clock.t.Add(time.Duration(ms) * time.Millisecond)
}

// pass appends a record of a new key (so there is a dirty segment) and
// cleans.
func (mt *marksTest) pass(key string) {
	mt.t.Helper()
	appendKV(mt.t, mt.l, mt.clock.t.UnixMilli(), key, []byte("x"))
	mt.l.SetHighWatermark(mt.l.LogEndOffset())
	if _, err := mt.l.clean(newOffsetMap(1<<20), nil); err != nil {
		mt.t.Fatal(err)
	}
}

// hasTombstone says whether key's tombstone is still in the log (and
// fails if an older value of key survived it).
func (mt *marksTest) hasTombstone(key string) bool {
	mt.t.Helper()
	recs, _ := readLogRecords(mt.t, mt.l)
	for _, r := range recs {
		if string(r.key) == key && r.value != nil {
			mt.t.Fatalf("the value of deleted key %s survived: %v", key, recs)
		}
		if string(r.key) == key {
			return true
		}
	}
	return false
}

// TestCleanMarksSurviveRestart: when a tombstone was first cleaned
// survives a restart, so it is removed delete.retention.ms after that
// clean, not that long after the restart.
func TestCleanMarksSurviveRestart(t *testing.T) {
	t.Parallel()
	mt := newMarksTest(t)
	defer func() { mt.m.Close() }()
	retention := mt.cfg.DeleteRetentionMs
	appendKV(t, mt.l, 1, "k", []byte("v"))
	appendKV(t, mt.l, 1, "k", nil)
	mt.pass("a") // the tombstone's first clean
	if !mt.hasTombstone("k") {
		t.Fatal("the tombstone went with its first clean")
	}
	mt.advance(retention / 2)
	mt.restart()
	if !mt.hasTombstone("k") {
		t.Fatal("the tombstone is gone after the restart")
	}
	mt.advance(retention/2 + 1)
	mt.pass("b")
	if mt.hasTombstone("k") {
		t.Fatal("the tombstone is still there delete.retention.ms after its first clean, across a restart")
	}
}

// TestCleanMarksTornFile: a torn or garbled clean marks file is ignored:
// the tombstone then counts from the open, kept longer, never removed
// early.
func TestCleanMarksTornFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(data []byte) []byte
	}{
		{"torn", func(d []byte) []byte { return d[:len(d)-3] }},
		{"empty", func([]byte) []byte { return nil }},
		{"garbage", func([]byte) []byte { return []byte("0\n1\nzz 17\n") }},
		{"backwards", func([]byte) []byte { return []byte("0\n2\n5 100\n3 200\n") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mt := newMarksTest(t)
			defer func() { mt.m.Close() }()
			retention := mt.cfg.DeleteRetentionMs
			appendKV(t, mt.l, 1, "k", []byte("v"))
			appendKV(t, mt.l, 1, "k", nil)
			mt.pass("a")
			mt.advance(retention / 2)
			if err := mt.m.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(mt.dir, "t-0", CleanMarksFile)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.damage(data), 0o644); err != nil {
				t.Fatal(err)
			}
			mt.open()
			mt.advance(retention/2 + 1)
			mt.pass("b")
			if !mt.hasTombstone("k") {
				t.Fatal("the tombstone went early: delete.retention.ms after its first clean but not after the open that lost its marks")
			}
			mt.advance(retention / 2)
			mt.pass("c")
			if mt.hasTombstone("k") {
				t.Fatal("the tombstone is still there delete.retention.ms after the open")
			}
		})
	}
}

// TestCleanMarksTruncation: a truncation below the clean point is saved
// with the marks at once, so that after a crash (the data directory's
// cleaner-offset-checkpoint still holding the old clean point) records
// appended since the truncation are not taken as cleaned: a tombstone
// among them survives its first clean.
func TestCleanMarksTruncation(t *testing.T) {
	t.Parallel()
	mt := newMarksTest(t)
	retention := mt.cfg.DeleteRetentionMs
	for i := range 6 {
		appendKV(t, mt.l, 1, fmt.Sprint("k", i), []byte("v"))
	}
	mt.pass("a")
	if err := mt.m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	old := mt.l.CleanPoint()
	if err := mt.l.Truncate(2); err != nil {
		t.Fatal(err)
	}
	appendKV(t, mt.l, 1, "k1", []byte("again"))
	appendKV(t, mt.l, 1, "k1", nil)
	for range 5 {
		appendKV(t, mt.l, 1, "pad", []byte("p"))
	}
	if mt.l.LogEndOffset() <= old {
		t.Fatalf("log end %d not past the old clean point %d", mt.l.LogEndOffset(), old)
	}
	// A crash: no checkpoint, no clean shutdown.
	mt.m.closeLogs()
	mt.advance(retention + 1)
	mt.open()
	defer func() { mt.m.Close() }()
	if cp := mt.l.CleanPoint(); cp > 2 {
		t.Fatalf("clean point %d after a truncation to 2 and a crash", cp)
	}
	mt.pass("b")
	if !mt.hasTombstone("k1") {
		t.Fatal("a tombstone appended after the truncation went with its first clean")
	}
}
