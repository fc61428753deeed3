package storage

import (
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

// txnModelRec is a record written in the transactions model.
type txnModelRec struct {
	cRec
	txn int // index into txns; -1 outside a transaction
}

// txnModelTxn is a transaction written in the model.
type txnModelTxn struct {
	pid    int64
	first  int64
	marker int64 // -1 while open
	abort  bool
	// emptyAt is the time of the first check that found none of its
	// batches in the log (-1: not yet).
	emptyAt int64
}

type txnModel struct {
	t         *testing.T
	cfg       LogConfig
	recs      []txnModelRec
	txns      []*txnModelTxn
	cleanedTo int64
}

// committed says whether the record counts for a read_committed reader.
func (m *txnModel) committed(r txnModelRec) bool {
	if r.txn < 0 {
		return true
	}
	x := m.txns[r.txn]
	return x.marker >= 0 && !x.abort
}

// readCommitted reads the log below its last stable offset as a
// read_committed consumer does: the aborted transactions of the fetch
// drop their producers' batches.
func readCommitted(t *testing.T, l *Log) map[int64]cRec {
	t.Helper()
	lso := l.LastStableOffset(l.LogEndOffset())
	start := l.LogStartOffset()
	var aborted []record.AbortedTxn
	for _, a := range l.AbortedTransactions(start, lso) {
		aborted = append(aborted, record.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
	f := record.NewAbortFilter(aborted)
	out := map[int64]cRec{}
	for off := start; off < lso; {
		res, err := l.Read(off, 1<<12, lso)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Batches) == 0 {
			break
		}
		err = record.SplitBatches(res.Batches, func(b []byte, h record.Header) error {
			off = h.NextOffset()
			if f.Skip(&h) {
				return nil
			}
			return record.ForEachRecord(b, func(r *record.Record) error {
				out[r.Offset] = cRec{offset: r.Offset, key: append([]byte(nil), r.Key...), value: r.Value}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// check holds the log against the model at time nowMs.
func (m *txnModel) check(l *Log, nowMs int64, what string) {
	t := m.t
	t.Helper()
	if p := l.CleanPoint(); p > m.cleanedTo {
		m.cleanedTo = p
	}
	recs, hs := readLogRecords(t, l)
	present := map[int64]bool{}
	for _, r := range recs {
		present[r.offset] = true
	}
	lso := l.LastStableOffset(l.LogEndOffset())
	rc := readCommitted(t, l)
	latest := map[string]int{} // latest committed record below the LSO, per key
	for i, r := range m.recs {
		switch {
		case r.txn >= 0 && m.txns[r.txn].marker < 0:
			if !present[r.offset] {
				t.Fatalf("%s: %v of an open transaction is gone", what, r.cRec)
			}
		case !m.committed(r):
			if _, ok := rc[r.offset]; ok {
				t.Fatalf("%s: read_committed shows aborted %v", what, r.cRec)
			}
			if present[r.offset] && r.offset < m.cleanedTo {
				t.Fatalf("%s: aborted %v below the clean point %d", what, r.cRec, m.cleanedTo)
			}
		default:
			if r.offset < lso {
				latest[string(r.key)] = i
			}
			if present[r.offset] {
				if r.offset < lso {
					if got, ok := rc[r.offset]; !ok || string(got.key) != string(r.key) || string(got.value) != string(r.value) {
						t.Fatalf("%s: read_committed lacks committed %v (got %v)", what, r.cRec, got)
					}
				}
				continue
			}
			if r.value == nil {
				continue // a tombstone may go (clean_test.go checks when)
			}
			later := false
			for _, o := range m.recs[i+1:] {
				if string(o.key) == string(r.key) && m.committed(o) && o.offset < m.cleanedTo {
					later = true
					break
				}
			}
			if !later {
				t.Fatalf("%s: committed %v gone with no later committed record of its key below the clean point %d", what, r.cRec, m.cleanedTo)
			}
		}
	}
	for k, i := range latest {
		if r := m.recs[i]; r.value != nil && !present[r.offset] {
			t.Fatalf("%s: the latest committed record of %q, %v, is gone", what, k, r.cRec)
		}
	}
	for off := range rc {
		if !present[off] {
			t.Fatalf("%s: read_committed shows %d, not in the log", what, off)
		}
	}
	// Markers: there while their transaction has a batch, and for
	// delete.retention.ms after it had none.
	for _, x := range m.txns {
		if x.marker < 0 {
			continue
		}
		batches, marker := 0, false
		for _, h := range hs {
			switch {
			case h.BaseOffset == x.marker:
				marker = h.Control()
			case h.ProducerID == x.pid && h.Transactional() && !h.Control() && h.BaseOffset >= x.first && h.BaseOffset < x.marker:
				batches++
			}
		}
		if batches == 0 && x.emptyAt < 0 {
			x.emptyAt = nowMs
		}
		switch {
		case batches > 0 && !marker:
			t.Fatalf("%s: the marker at %d is gone, its transaction has %d batches left", what, x.marker, batches)
		case !marker && nowMs-x.emptyAt < m.cfg.DeleteRetentionMs:
			t.Fatalf("%s: the marker at %d went %d ms after its transaction had no batch left", what, x.marker, nowMs-x.emptyAt)
		}
	}
	checkSegmentIndexes(t, l)
}

// markersLeft counts the control batches of the log.
func markersLeft(t *testing.T, l *Log) int {
	_, hs := readLogRecords(t, l)
	n := 0
	for _, h := range hs {
		if h.Control() {
			n++
		}
	}
	return n
}

// TestLogCleanTxnModel writes plain records and transactions (committed,
// aborted, some left open for a while) over random keys, cleans with
// random offset maps at random times, reopens, and checks the log
// against the model: read_committed never shows an aborted record and
// shows the latest committed record of every key; an aborted record
// below the clean point is gone; an open transaction's records stay; a
// marker stays while its transaction has a batch and delete.retention.ms
// after; and at the end, with everything ended and cleaned twice past
// the retention, no aborted record and no marker of an empty
// transaction is left.
func TestLogCleanTxnModel(t *testing.T) {
	t.Parallel()
	seeds := testdepth.Rounds(6, 2)
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runCleanTxnModel(t, seed) })
	}
}

func runCleanTxnModel(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	cfg := compactConfig()
	cfg.SegmentBytes = int64(500 + rng.Intn(1500))
	cfg.MinCompactionLagMs = 0
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
	m := &txnModel{t: t, cfg: cfg}
	keys := 4 + rng.Intn(20)
	type producer struct {
		id   int64
		seq  int32
		open int // the open transaction, -1 if none
	}
	prods := []*producer{{id: 100, open: -1}, {id: 101, open: -1}, {id: 102, open: -1}}
	appendRecs := func(p *producer, what string) {
		now := clock.t.UnixMilli()
		b := record.NewBuilder(record.Codec(rng.Intn(3)))
		n := 1 + rng.Intn(4)
		var rs []txnModelRec
		for j := 0; j < n; j++ {
			r := txnModelRec{cRec: cRec{key: []byte(fmt.Sprintf("key-%d", rng.Intn(keys))), ts: now}, txn: -1}
			if rng.Intn(6) != 0 {
				r.value = []byte(fmt.Sprintf("%s-%d", what, j))
			}
			b.Append(r.ts, r.key, r.value, nil)
			rs = append(rs, r)
		}
		if p != nil {
			b.SetProducer(p.id, 0, p.seq)
			b.SetTransactional(true)
			p.seq += int32(n)
		}
		info := mustAppend(t, l, b.Build(), 0)
		if p != nil && p.open < 0 {
			m.txns = append(m.txns, &txnModelTxn{pid: p.id, first: info.FirstOffset, marker: -1, emptyAt: -1})
			p.open = len(m.txns) - 1
		}
		for j := range rs {
			rs[j].offset = info.FirstOffset + int64(j)
			if p != nil {
				rs[j].txn = p.open
			}
			m.recs = append(m.recs, rs[j])
		}
	}
	end := func(p *producer, abort bool) {
		typ := record.ControlCommit
		if abort {
			typ = record.ControlAbort
		}
		info := mustMarker(t, l, p.id, 0, typ, 0)
		x := m.txns[p.open]
		x.marker, x.abort = info.FirstOffset, abort
		p.open = -1
	}
	clean := func(what string) {
		l.SetHighWatermark(l.LogEndOffset())
		mapBytes := int64(16+rng.Intn(200)) * offsetMapSlotBytes
		if rng.Intn(2) == 0 {
			mapBytes = 1 << 20
		}
		if _, err := l.clean(newOffsetMap(mapBytes), nil); err != nil {
			t.Fatalf("%s: clean: %v", what, err)
		}
		m.check(l, clock.t.UnixMilli(), what+" (after clean)")
	}
	for step := 0; step < 300; step++ {
		what := fmt.Sprintf("seed %d step %d", seed, step)
		switch op := rng.Intn(100); {
		case op < 30:
			appendRecs(nil, what)
		case op < 55:
			appendRecs(prods[rng.Intn(len(prods))], what)
		case op < 68:
			if p := prods[rng.Intn(len(prods))]; p.open >= 0 {
				end(p, rng.Intn(2) == 0)
			}
		case op < 78:
			clock.t = clock.t.Add(time.Duration(rng.Intn(500)) * time.Millisecond)
		case op < 84:
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		case op < 96:
			clean(what)
		default:
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = open()
			m.check(l, clock.t.UnixMilli(), what+" (after reopen)")
		}
	}
	// The end: every transaction ended, cleaned until the markers of
	// the empty transactions are past their horizons.
	for _, p := range prods {
		if p.open >= 0 {
			end(p, rng.Intn(2) == 0)
		}
	}
	for i := range 4 {
		// A pass needs a dirty section: a record of a new key.
		b := record.NewBuilder(record.None)
		b.Append(clock.t.UnixMilli(), fmt.Appendf(nil, "final-%d", i), []byte("v"), nil)
		info := mustAppend(t, l, b.Build(), 0)
		m.recs = append(m.recs, txnModelRec{cRec: cRec{offset: info.FirstOffset, key: fmt.Appendf(nil, "final-%d", i), value: []byte("v")}, txn: -1})
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		clock.t = clock.t.Add(time.Duration(cfg.DeleteRetentionMs+1) * time.Millisecond)
		l.SetHighWatermark(l.LogEndOffset())
		if _, err := l.clean(newOffsetMap(1<<20), nil); err != nil {
			t.Fatal(err)
		}
		m.check(l, clock.t.UnixMilli(), fmt.Sprintf("seed %d final pass %d", seed, i))
	}
	recs, hs := readLogRecords(t, l)
	for _, r := range recs {
		for _, w := range m.recs {
			if w.offset == r.offset && !m.committed(w) {
				t.Fatalf("after the final passes: aborted %v left", w.cRec)
			}
		}
	}
	// Each marker left has a batch of its transaction before it.
	for _, x := range m.txns {
		marker, batches := false, 0
		for _, h := range hs {
			if h.BaseOffset == x.marker {
				marker = true
			}
			if h.ProducerID == x.pid && !h.Control() && h.BaseOffset >= x.first && h.BaseOffset < x.marker {
				batches++
			}
		}
		if marker && batches == 0 {
			t.Fatalf("after the final passes: the marker at %d of a transaction with no batch left", x.marker)
		}
	}
	if n := markersLeft(t, l); n > len(m.txns) {
		t.Fatalf("%d markers for %d transactions", n, len(m.txns))
	}
	// The aborted transactions index holds only transactions with a
	// batch left (emptied, kept as its producer's last), across a reopen.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open()
	_, hs = readLogRecords(t, l)
	for _, a := range l.AbortedTransactions(l.LogStartOffset(), math.MaxInt64) {
		batches := 0
		for _, h := range hs {
			if h.ProducerID == a.ProducerID && !h.Control() && h.BaseOffset >= a.FirstOffset && h.BaseOffset < a.LastOffset {
				batches++
				if h.NumRecords != 0 {
					t.Fatalf("aborted transaction %+v has a batch with records: %+v", a, h)
				}
			}
		}
		if batches == 0 {
			t.Fatalf("an aborted transaction with no batch left in the index: %+v", a)
		}
	}
	m.check(l, clock.t.UnixMilli(), "final reopen")
}

// writeTxnTemplate writes into dir a compacted log of plain records and
// transactions, committed and aborted, over several segments, cleaned
// once (so that the next pass merges cleaned segments with their
// .txnindex files), and returns its model.
func writeTxnTemplate(t *testing.T, dir string, cfg LogConfig, clock *fakeClock) *txnModel {
	t.Helper()
	l, err := OpenLog(dir, "t", 0, cfg, 0, Options{FS: noSyncFS{}, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	m := &txnModel{t: t, cfg: cfg}
	rng := rand.New(rand.NewSource(5))
	seqs := map[int64]int32{}
	open := map[int64]int{}
	for i := 0; i < 60; i++ {
		now := clock.t.UnixMilli()
		pid := int64(-1)
		if rng.Intn(2) == 0 {
			pid = 100 + int64(rng.Intn(3))
		}
		if pid >= 0 && rng.Intn(3) == 0 {
			if x, ok := open[pid]; ok {
				abort := rng.Intn(2) == 0
				typ := record.ControlCommit
				if abort {
					typ = record.ControlAbort
				}
				info := mustMarker(t, l, pid, 0, typ, 0)
				m.txns[x].marker, m.txns[x].abort = info.FirstOffset, abort
				delete(open, pid)
				continue
			}
		}
		b := record.NewBuilder(record.None)
		n := 1 + rng.Intn(3)
		var rs []txnModelRec
		for j := 0; j < n; j++ {
			r := txnModelRec{cRec: cRec{key: fmt.Appendf(nil, "k%d", rng.Intn(12)), value: fmt.Appendf(nil, "v%d-%d", i, j), ts: now}, txn: -1}
			b.Append(r.ts, r.key, r.value, nil)
			rs = append(rs, r)
		}
		if pid >= 0 {
			b.SetProducer(pid, 0, seqs[pid])
			b.SetTransactional(true)
			seqs[pid] += int32(n)
		}
		info := mustAppend(t, l, b.Build(), 0)
		if pid >= 0 {
			if _, ok := open[pid]; !ok {
				m.txns = append(m.txns, &txnModelTxn{pid: pid, first: info.FirstOffset, marker: -1, emptyAt: -1})
				open[pid] = len(m.txns) - 1
			}
		}
		for j := range rs {
			rs[j].offset = info.FirstOffset + int64(j)
			if pid >= 0 {
				rs[j].txn = open[pid]
			}
			m.recs = append(m.recs, rs[j])
		}
	}
	for pid, x := range open {
		info := mustMarker(t, l, pid, 0, record.ControlAbort, 0)
		m.txns[x].marker, m.txns[x].abort = info.FirstOffset, true
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.clean(newOffsetMap(1<<20), nil); err != nil {
		t.Fatal(err)
	}
	m.check(l, clock.t.UnixMilli(), "template")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return m
}

// clone copies the model (its transactions too).
func (m *txnModel) clone(t *testing.T) *txnModel {
	c := &txnModel{t: t, cfg: m.cfg, recs: m.recs, cleanedTo: m.cleanedTo}
	for _, x := range m.txns {
		y := *x
		c.txns = append(c.txns, &y)
	}
	return c
}

// TestLogCleanTxnCrashAtEveryStep fails a clean pass over a log with
// transactions (merging cleaned segments and their .txnindex files) at
// each of its filesystem operations, as a crash and as a lone error, and
// checks the reopened log against the model: read_committed shows no
// aborted record and the latest committed record of every key; markers
// stay while their transactions have batches; no leftovers.
func TestLogCleanTxnCrashAtEveryStep(t *testing.T) {
	t.Parallel()
	cfg := compactConfig()
	cfg.SegmentBytes = 900
	cfg.MinCompactionLagMs = 0
	template := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(5_000_000)}
	model := writeTxnTemplate(t, template, cfg, clock)
	clock.t = clock.t.Add(time.Hour)

	ref := t.TempDir()
	copyDir(t, template, ref)
	inj := &countingInjector{}
	efs := NewErrorFS(noSyncFS{})
	efs.SetInjector(inj.inject)
	l, err := OpenLog(ref, "t", 0, cfg, 0, Options{FS: efs, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	inj.mu.Lock()
	inj.count = 0
	inj.mu.Unlock()
	st, err := l.clean(newOffsetMap(1<<20), nil)
	if err != nil || st.SegmentsIn <= st.SegmentsOut {
		t.Fatalf("reference clean merges no segments: %+v, %v", st, err)
	}
	ops := inj.count
	t.Logf("a clean pass takes %d filesystem operations that change the disk", ops)
	nowMs := clock.t.UnixMilli()
	model.clone(t).check(l, nowMs, "reference")
	l.Close()
	swapped := false
	for _, crash := range []bool{true, false} {
		for n := 1; n <= ops; n++ {
			what := fmt.Sprintf("crash=%v at operation %d of %d", crash, n, ops)
			dir := filepath.Join(t.TempDir(), "t-0")
			copyDir(t, template, dir)
			inj := &countingInjector{crash: crash}
			efs := NewErrorFS(noSyncFS{})
			efs.Torn = true
			efs.SetInjector(inj.inject)
			l, err := OpenLog(dir, "t", 0, cfg, 0, Options{FS: efs, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			l.SetHighWatermark(l.LogEndOffset())
			inj.mu.Lock()
			inj.count, inj.n = 0, n
			inj.mu.Unlock()
			_, _ = l.clean(newOffsetMap(1<<20), nil)
			if !crash {
				inj.mu.Lock()
				inj.n = 0
				inj.mu.Unlock()
				model.clone(t).check(l, nowMs, what+", before reopening")
				_ = l.Close()
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				swapped = swapped || strings.HasSuffix(e.Name(), txnIndexSuffix+swapSuffix)
			}
			l2, err := OpenLog(dir, "t", 0, cfg, 0, Options{FS: noSyncFS{}, Now: clock.Now})
			if err != nil {
				t.Fatalf("%s: reopen: %v", what, err)
			}
			model.clone(t).check(l2, nowMs, what+", reopened")
			ents, _ = os.ReadDir(dir)
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) {
					t.Fatalf("%s: %s left after reopening", what, e.Name())
				}
			}
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !swapped {
		t.Fatal("no crash left a .txnindex.swap to recover")
	}
}

// TestLogCleanTransactions: an aborted transaction's records go with the
// first pass over them and do not hide the committed record of their key
// before them; its marker stays while the transaction has a batch, is
// stamped with a delete horizon by the first pass that finds it empty and
// goes with a pass after that horizon, with its index entry; a committed
// transaction's records are deduplicated like any other; nothing at or
// above the last stable offset is cleaned.
func TestLogCleanTransactions(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	l := openCompactTest(t, clock)
	defer l.Close()
	retention := l.Config().DeleteRetentionMs
	now := clock.t.UnixMilli()
	appendKV(t, l, now, "k", []byte("committed"))   // 0
	mustAppend(t, l, txnBatch(1, 0, 0, 2, now), 0)  // 1-2, key k
	mustMarker(t, l, 1, 0, record.ControlAbort, 0)  // 3
	mustAppend(t, l, txnBatch(3, 0, 0, 1, now), 0)  // 4, key k
	mustMarker(t, l, 3, 0, record.ControlCommit, 0) // 5
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	open := mustAppend(t, l, txnBatch(2, 0, 0, 1, now), 0) // 6, still open
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	appendKV(t, l, now, "m", []byte("m1")) // 7
	appendKV(t, l, now, "m", []byte("m2")) // 8
	appendKV(t, l, now, "z", []byte("z"))  // 9
	pass := func() {
		t.Helper()
		l.SetHighWatermark(l.LogEndOffset())
		if _, err := l.clean(newOffsetMap(1<<20), nil); err != nil {
			t.Fatal(err)
		}
	}
	state := func() (map[int64]string, map[int64]record.Header) {
		recs, hs := readLogRecords(t, l)
		got := map[int64]string{}
		for _, r := range recs {
			got[r.offset] = string(r.key) + "=" + string(r.value)
		}
		markers := map[int64]record.Header{}
		for _, h := range hs {
			if h.Control() {
				markers[h.BaseOffset] = h
				delete(got, h.BaseOffset)
			}
		}
		return got, markers
	}
	pass()
	if cp := l.CleanPoint(); cp > open.FirstOffset {
		t.Fatalf("clean point %d above the open transaction at %d", cp, open.FirstOffset)
	}
	got, markers := state()
	want := map[int64]string{4: "k=txn value", 6: "k=txn value", 7: "m=m1", 8: "m=m2", 9: "z=z"}
	if len(got) != len(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	for off, kv := range want {
		if got[off] != kv {
			t.Fatalf("offset %d: %q, want %q (records %v)", off, got[off], kv, got)
		}
	}
	// The aborted transaction's batch was there at this pass: its marker
	// and index entry stay, unstamped.
	if h, ok := markers[3]; !ok {
		t.Fatal("the abort marker went with the pass that removed its records")
	} else if _, stamped := h.DeleteHorizon(); stamped {
		t.Fatal("the abort marker was stamped by the pass that removed its records")
	}
	if a := l.AbortedTransactions(0, math.MaxInt64); len(a) != 1 || a[0].LastOffset != 3 {
		t.Fatalf("aborted transactions %+v after the first pass", a)
	}
	if _, ok := markers[5]; !ok {
		t.Fatal("the commit marker of a transaction with a record left went")
	}

	// The aborted transaction's batch stays, empty, as its producer's
	// last: so do its marker and entry.
	recs, hs := readLogRecords(t, l)
	if len(hs) == 0 || hs[0].BaseOffset != 1 || hs[0].NumRecords != 0 {
		t.Fatalf("the aborted batch is not kept empty as its producer's last: %v %+v", recs, hs)
	}
	// Once the producer wrote again (and the open transaction is
	// committed), a pass drops the empty batch, meeting it: the marker
	// stays; the pass after finds the transaction empty: its marker is
	// stamped now + delete.retention.ms, its entry goes.
	mustAppend(t, l, txnBatch(1, 0, 2, 1, now), 0)  // 10
	mustMarker(t, l, 1, 0, record.ControlCommit, 0) // 11
	mustMarker(t, l, 2, 0, record.ControlCommit, 0) // 12
	appendKV(t, l, now, "a", []byte("a"))
	pass()
	if _, markers = state(); markers[3].BaseOffset != 3 {
		t.Fatal("the abort marker went with the pass that dropped its empty batch")
	}
	if _, stamped := markers[3].DeleteHorizon(); stamped {
		t.Fatal("the abort marker was stamped by the pass that dropped its empty batch")
	}
	appendKV(t, l, now, "a2", []byte("a"))
	pass()
	_, markers = state()
	h, ok := markers[3]
	if hz, stamped := h.DeleteHorizon(); !ok || !stamped || hz != clock.t.UnixMilli()+retention {
		t.Fatalf("abort marker %v after the second pass: horizon %d %v, want %d", ok, hz, stamped, clock.t.UnixMilli()+retention)
	}
	if a := l.AbortedTransactions(0, math.MaxInt64); len(a) != 0 {
		t.Fatalf("aborted transactions %+v with none left in the log", a)
	}
	// Within the horizon, it stays; after it, it goes.
	clock.t = clock.t.Add(time.Duration(retention/2) * time.Millisecond)
	appendKV(t, l, now, "b", []byte("b"))
	pass()
	if _, markers = state(); markers[3].BaseOffset != 3 {
		t.Fatal("the abort marker went before its delete horizon")
	}
	clock.t = clock.t.Add(time.Duration(retention/2) * time.Millisecond)
	appendKV(t, l, now, "c", []byte("c"))
	pass()
	if _, markers = state(); markers[3].BaseOffset == 3 {
		t.Fatal("the abort marker is still there after its delete horizon")
	}
	// The commit markers stay while their transactions have a batch: 10
	// has its record, 4 and 6 lost theirs (to 10 and 4) but stay empty
	// as their producers' last batches.
	for _, off := range []int64{5, 11, 12} {
		if _, ok := markers[off]; !ok {
			t.Fatalf("the commit marker at %d of a transaction with a batch left went", off)
		}
	}
	got, _ = state()
	if len(got) != 7 || got[10] != "k=txn value" || got[8] != "m=m2" {
		t.Fatalf("records at the end: %v", got)
	}
}
