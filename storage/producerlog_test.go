package storage

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/quirelog/quire/record"
)

// producerHistory appends n batches, round robin from producers 1..k (2
// records each), to l as leader, returning each append's result and the
// producer list after it.
type producerHistory struct {
	infos   []AppendInfo
	seqs    []int32
	pids    []int64
	after   [][]ProducerInfo
	nextSeq map[int64]int32
	ts      int64 // of the first batch; later ones add their index
}

func appendProducers(t testing.TB, l *Log, n, k int) *producerHistory {
	t.Helper()
	// Timestamps of now: older ones would expire at the next open.
	h := &producerHistory{nextSeq: map[int64]int32{}, ts: time.Now().UnixMilli()}
	for i := 0; i < n; i++ {
		pid := int64(i%k + 1)
		seq := h.nextSeq[pid]
		h.infos = append(h.infos, mustAppend(t, l, producerBatch(pid, 0, seq, 2, h.ts+int64(i)), 0))
		h.seqs = append(h.seqs, seq)
		h.pids = append(h.pids, pid)
		h.nextSeq[pid] = seq + 2
		h.after = append(h.after, l.Producers())
	}
	return h
}

// retry rebuilds batch i of the history.
func (h *producerHistory) retry(i int) []byte {
	return producerBatch(h.pids[i], 0, h.seqs[i], 2, h.ts+int64(i))
}

// checkRetries checks that each producer's latest five batches are
// answered as duplicates.
func (h *producerHistory) checkRetries(t *testing.T, l *Log) {
	t.Helper()
	seen := map[int64]int{}
	for i := len(h.infos) - 1; i >= 0; i-- {
		if seen[h.pids[i]]++; seen[h.pids[i]] <= ProducerWindow {
			mustDuplicate(t, l, h.retry(i), h.infos[i])
		}
	}
}

func snapshotFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+snapshotSuffix))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

func reopen(t *testing.T, l *Log, cfg LogConfig, opts Options) *Log {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if opts.FS == nil {
		opts.FS = noSyncFS{}
	}
	l2, err := OpenLog(l.Dir(), "t", 0, cfg, math.MaxInt64, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l2
}

func TestProducerSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	ps := newProducerState(0)
	off := int64(0)
	for i := 0; i < 40; i++ {
		pid := int64(i%4) * 1000
		b := producerBatch(pid, int16(i/20), int32(i/4*3), 3, int64(i))
		record.SetBaseOffset(b, off)
		h, _ := record.ParseHeader(b)
		ps.update(&h, nil)
		off = h.NextOffset()
	}
	data := encodeSnapshot(ps)
	got, err := decodeSnapshot(data, off)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ps) {
		t.Fatalf("decoded %+v, want %+v", got, ps)
	}
	if !bytes.Equal(encodeSnapshot(got), data) {
		t.Fatal("re-encoding differs")
	}
	// Entries out of id order are refused even with a good CRC.
	entry := snapshotEntryHead + ProducerWindow*snapshotBatchSize
	swapped := append([]byte(nil), data...)
	copy(swapped[snapshotHeaderSize:], data[snapshotHeaderSize+entry:snapshotHeaderSize+2*entry])
	copy(swapped[snapshotHeaderSize+entry:], data[snapshotHeaderSize:snapshotHeaderSize+entry])
	binary.BigEndian.PutUint32(swapped[1:], crc32.Checksum(swapped[snapshotCRCFrom:], castagnoli))
	if _, err := decodeSnapshot(swapped, off); !isErr(err, errBadSnapshot) {
		t.Fatalf("entries out of order: %v", err)
	}
	if _, err := decodeSnapshot(data, off+1); !isErr(err, errBadSnapshot) {
		t.Fatalf("offset mismatch: %v", err)
	}
	for n := 0; n < len(data); n++ {
		if _, err := decodeSnapshot(data[:n], off); !isErr(err, errBadSnapshot) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	for i := range data {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x10
		if _, err := decodeSnapshot(bad, off); !isErr(err, errBadSnapshot) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
}

// TestProducerRestart: a clean close and reopen leaves the producer state
// as it was, and the snapshots sit at the segment bases and the log end.
func TestProducerRestart(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	l := openTest(t, t.TempDir(), cfg, 0)
	h := appendProducers(t, l, 120, 3)
	if l.NumSegments() < 3 {
		t.Fatalf("want several segments, have %d", l.NumSegments())
	}
	want := l.Producers()
	leo := l.LogEndOffset()
	l = reopen(t, l, cfg, Options{})
	defer l.Close()
	if got := l.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart %+v, want %+v", got, want)
	}
	names := snapshotFiles(t, l.Dir())
	l.mu.RLock()
	for _, s := range l.segs[1:] {
		if !strings.Contains(strings.Join(names, " "), segmentName(s.base)+snapshotSuffix) {
			t.Errorf("no snapshot at segment base %d: %v", s.base, names)
		}
	}
	l.mu.RUnlock()
	if names[len(names)-1] != segmentName(leo)+snapshotSuffix {
		t.Fatalf("no snapshot at the log end %d: %v", leo, names)
	}
	h.checkRetries(t, l)
}

// TestProducerCrashRestart: without the close snapshot (a crash) the state
// is rebuilt from the last roll's snapshot plus the log after it.
func TestProducerCrashRestart(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	dir := t.TempDir()
	l := openTest(t, dir, cfg, 0)
	h := appendProducers(t, l, 100, 4)
	want := l.Producers()
	crash := t.TempDir()
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crash, n.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	l2 := openTest(t, crash, cfg, 0)
	defer l2.Close()
	if got := l2.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after crash %+v, want %+v", got, want)
	}
	h.checkRetries(t, l2)
}

// TestProducerCorruptSnapshot: a damaged snapshot is skipped (and
// logged); the state comes out the same from an older one, or from the
// log when every snapshot is damaged.
func TestProducerCorruptSnapshot(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	var logs bytes.Buffer
	opts := Options{FS: noSyncFS{}, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})}
	l, err := OpenLog(t.TempDir(), "t", 0, cfg, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	h := appendProducers(t, l, 120, 3)
	want := l.Producers()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	flip := func(name string) {
		path := filepath.Join(l.Dir(), name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 1
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := snapshotFiles(t, l.Dir())
	flip(names[len(names)-1])
	l2, err := OpenLog(l.Dir(), "t", 0, cfg, math.MaxInt64, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := l2.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a corrupt snapshot %+v, want %+v", got, want)
	}
	if !strings.Contains(logs.String(), "producer state snapshot unreadable") {
		t.Fatalf("corrupt snapshot not logged: %q", logs.String())
	}
	h.checkRetries(t, l2)
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range snapshotFiles(t, l.Dir()) {
		flip(n)
	}
	l3, err := OpenLog(l.Dir(), "t", 0, cfg, math.MaxInt64, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	if got := l3.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("with every snapshot corrupt %+v, want %+v", got, want)
	}
	h.checkRetries(t, l3)
}

// TestProducerTruncation: a truncation below a producer's latest batches
// takes its state back to what it was at the cut, whatever segment the cut
// is in, and deletes the snapshots past it.
func TestProducerTruncation(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	l := openTest(t, t.TempDir(), cfg, 0)
	defer l.Close()
	h := appendProducers(t, l, 90, 2)
	for _, k := range []int{85, 60, 31, 3} {
		cut := h.infos[k].FirstOffset
		if err := l.Truncate(cut); err != nil {
			t.Fatal(err)
		}
		if got := l.Producers(); !reflect.DeepEqual(got, h.after[k-1]) {
			t.Fatalf("cut at batch %d: %+v, want %+v", k, got, h.after[k-1])
		}
		for _, n := range snapshotFiles(t, l.Dir()) {
			if off, _ := parseSegmentName(n, snapshotSuffix); off > cut {
				t.Fatalf("snapshot %s past the cut at %d", n, cut)
			}
		}
		mustDuplicate(t, l, h.retry(k-1), h.infos[k-1])
		mustRefuse(t, l, h.retry(k+2), ErrOutOfOrderSequence) // batch k (same producer) is missing
	}
	// The cut batch, sent again, is new and lands where it was.
	info := mustAppend(t, l, h.retry(3), 0)
	if info.Duplicate || info.FirstOffset != h.infos[3].FirstOffset {
		t.Fatalf("re-sent batch: %+v, was %+v", info, h.infos[3])
	}
	// Below every batch of a producer: it is unknown again.
	if err := l.Truncate(h.infos[1].FirstOffset); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, l, h.retry(3), ErrUnknownProducerID)
	if err := l.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	if got, names := l.Producers(), snapshotFiles(t, l.Dir()); len(got) != 0 || len(names) != 0 {
		t.Fatalf("after a full truncation: %+v, %v", got, names)
	}
}

// TestProducerFollowerBecomesLeader: follower appends keep the producer
// state, so a follower that becomes leader answers retries of batches it
// only replicated as duplicates, at the offsets the old leader gave.
func TestProducerFollowerBecomesLeader(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	leader := openTest(t, t.TempDir(), cfg, 0)
	defer leader.Close()
	follower := openTest(t, t.TempDir(), cfg, 0)
	defer follower.Close()
	h := appendProducers(t, leader, 70, 3)
	mustAppend(t, leader, makeBatch(3, 10, 5000), 0)
	for follower.LogEndOffset() < leader.LogEndOffset() {
		res, err := leader.Read(follower.LogEndOffset(), 1000, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendAsFollower(append([]byte(nil), res.Batches...)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := follower.Producers(), leader.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower %+v, leader %+v", got, want)
	}
	h.checkRetries(t, follower)
	next := producerBatch(1, 0, h.nextSeq[1], 1, 9000)
	if info := mustAppend(t, follower, next, 1); info.Duplicate || info.FirstOffset != leader.LogEndOffset() {
		t.Fatalf("next batch on the new leader: %+v", info)
	}
}

// TestProducerRetentionDeletesSnapshots: retention deletes the snapshots
// of the segments it deletes; the state (even of a producer whose batches
// are all gone) survives a restart through the first remaining segment's
// snapshot.
func TestProducerRetentionDeletesSnapshots(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	l := openTest(t, t.TempDir(), cfg, 0)
	mustAppend(t, l, producerBatch(99, 2, 0, 3, time.Now().UnixMilli()), 0)
	appendProducers(t, l, 200, 2)
	want := l.Producers()
	cfg.RetentionBytes = cfg.SegmentBytes
	l.SetConfig(cfg)
	n, err := l.ApplyRetention()
	if err != nil || n == 0 {
		t.Fatalf("retention deleted %d: %v", n, err)
	}
	start := l.LogStartOffset()
	names := snapshotFiles(t, l.Dir())
	for _, name := range names {
		if off, _ := parseSegmentName(name, snapshotSuffix); off < start {
			t.Fatalf("snapshot %s below the log start %d", name, start)
		}
	}
	if len(names) == 0 || names[0] != segmentName(start)+snapshotSuffix {
		t.Fatalf("no snapshot at the first segment %d: %v", start, names)
	}
	l = reopen(t, l, cfg, Options{})
	defer l.Close()
	if got := l.Producers(); !reflect.DeepEqual(got, want) || got[len(got)-1].ProducerID != 99 {
		t.Fatalf("after retention and restart %+v, want %+v", got, want)
	}
	mustRefuse(t, l, producerBatch(99, 1, 3, 1, 2), ErrInvalidProducerEpoch)
}

// FuzzDecodeSnapshot: any bytes in a snapshot file are refused with
// errBadSnapshot or decode to a state that encodes back to them.
func FuzzDecodeSnapshot(f *testing.F) {
	ps := newProducerState(0)
	for i, pid := range []int64{3, 1, 2, 1, 1} {
		b := producerBatch(pid, 0, int32(i), 2, int64(i))
		record.SetBaseOffset(b, int64(2*i))
		h, _ := record.ParseHeader(b)
		ps.update(&h, nil)
	}
	f.Add(encodeSnapshot(ps), int64(10))
	f.Add(encodeSnapshot(newProducerState(7)), int64(7))
	f.Fuzz(func(t *testing.T, data []byte, off int64) {
		got, err := decodeSnapshot(data, off)
		if err != nil {
			if !isErr(err, errBadSnapshot) {
				t.Fatalf("error %v is not errBadSnapshot", err)
			}
			return
		}
		if !bytes.Equal(encodeSnapshot(got), data) {
			t.Fatalf("decoded %x and encoded it differently", data)
		}
	})
}

// TestProducerManagerExpiry: Manager.ExpireProducers expires in every log
// by the manager's clock, and a clean restart keeps the unexpired state.
func TestProducerManagerExpiry(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.UnixMilli(5_000_000)}
	cfg := smallConfig()
	cfg.ProducerIDExpirationMs = 1000
	dir := t.TempDir()
	m, err := OpenManager(dir, cfg, Options{FS: noSyncFS{}, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := m.GetOrCreate("t", 0, cfg)
	b, _ := m.GetOrCreate("t", 1, cfg)
	mustAppend(t, a, producerBatch(1, 0, 0, 1, 4_999_500), 0)
	mustAppend(t, b, producerBatch(2, 0, 0, 1, 4_999_000), 0)
	mustAppend(t, b, producerBatch(3, 0, 0, 1, 5_000_000), 0)
	if n := m.ExpireProducers(); n != 1 {
		t.Fatalf("expired %d, want producer 2 only", n)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = OpenManager(dir, cfg, Options{FS: noSyncFS{}, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, _ = m.GetOrCreate("t", 0, cfg)
	b, _ = m.GetOrCreate("t", 1, cfg)
	if pa, pb := a.Producers(), b.Producers(); len(pa) != 1 || pa[0].ProducerID != 1 || len(pb) != 1 || pb[0].ProducerID != 3 {
		t.Fatalf("after restart %+v %+v", pa, pb)
	}
	clk.t = clk.t.Add(time.Second)
	if n := m.ExpireProducers(); n != 2 {
		t.Fatalf("expired %d, want 2", n)
	}
}
