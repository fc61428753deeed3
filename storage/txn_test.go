package storage

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/quirelog/quire/record"
)

// txnBatch is producerBatch with the transactional bit set.
func txnBatch(pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	b := record.NewBuilder(record.None)
	b.SetProducer(pid, epoch, seq)
	b.SetTransactional(true)
	for i := 0; i < n; i++ {
		b.Append(ts, []byte("k"), []byte("txn value"), nil)
	}
	return b.Build()
}

func mustMarker(t testing.TB, l *Log, pid int64, epoch int16, typ record.ControlType, coord int32) AppendInfo {
	t.Helper()
	info, err := l.AppendMarker(pid, epoch, record.Marker{Type: typ, CoordinatorEpoch: coord}, 0)
	if err != nil {
		t.Fatalf("marker %v for producer %d: %v", typ, pid, err)
	}
	return info
}

func wantUnstable(t testing.TB, l *Log, want int64) {
	t.Helper()
	if got := l.FirstUnstableOffset(); got != want {
		t.Fatalf("first unstable offset %d, want %d", got, want)
	}
}

func wantAborted(t testing.TB, l *Log, from, upTo int64, want []AbortedTxn) {
	t.Helper()
	if got := l.AbortedTransactions(from, upTo); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted transactions [%d, %d): %+v, want %+v", from, upTo, got, want)
	}
}

// TestLogTxnLastStableOffset: the LSO stops at the oldest open
// transaction, moves on as markers end them, and an abort lands in the
// aborted-transactions index with the LSO after it.
func TestLogTxnLastStableOffset(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	wantUnstable(t, l, math.MaxInt64)
	mustAppend(t, l, makeBatch(2, 10, 1), 0)           // 0-1
	a1 := mustAppend(t, l, txnBatch(1, 0, 0, 2, 2), 0) // 2-3
	a2 := mustAppend(t, l, txnBatch(2, 0, 0, 1, 3), 0) // 4
	mustAppend(t, l, txnBatch(1, 0, 2, 1, 4), 0)       // 5
	wantUnstable(t, l, a1.FirstOffset)
	if got := l.LastStableOffset(3); got != 2 {
		t.Fatalf("LSO with hw 3: %d", got)
	}
	if got := l.LastStableOffset(1); got != 1 {
		t.Fatalf("LSO with hw 1: %d", got)
	}
	c1 := mustMarker(t, l, 1, 0, record.ControlCommit, 0) // 6
	wantUnstable(t, l, a2.FirstOffset)
	ab := mustMarker(t, l, 2, 0, record.ControlAbort, 0) // 7
	wantUnstable(t, l, math.MaxInt64)
	want := []AbortedTxn{{ProducerID: 2, FirstOffset: a2.FirstOffset, LastOffset: ab.FirstOffset, LastStableOffset: ab.FirstOffset + 1}}
	wantAborted(t, l, 0, l.LogEndOffset(), want)
	wantAborted(t, l, 0, a2.FirstOffset, nil)
	wantAborted(t, l, ab.FirstOffset+1, l.LogEndOffset(), nil)
	if c1.LastOffset != 6 || ab.LastOffset != 7 {
		t.Fatalf("markers at %d and %d", c1.LastOffset, ab.LastOffset)
	}
	// The markers are control batches in the log, and producers list
	// their ended transactions.
	batches := readAll(t, l)
	last := batches[len(batches)-1]
	if m, err := record.ParseMarker(last); err != nil || m.Type != record.ControlAbort {
		t.Fatalf("last batch marker %+v, %v", m, err)
	}
	for _, p := range l.Producers() {
		if p.TxnStartOffset != -1 || p.CoordinatorEpoch != 0 {
			t.Fatalf("producer after its marker: %+v", p)
		}
	}
}

// TestLogTxnRules: what a leader refuses around transactions.
func TestLogTxnRules(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	mustAppend(t, l, txnBatch(1, 3, 0, 1, 1), 0)
	// A producer never writes a control batch itself.
	mustRefuse(t, l, record.BuildMarker(1, 3, record.Marker{Type: record.ControlCommit}, 1), ErrCorruptBatch)
	// Inside its transaction, only transactional batches.
	mustRefuse(t, l, producerBatch(1, 3, 1, 1, 1), ErrInvalidTxnState)
	mustMarker(t, l, 1, 3, record.ControlCommit, 5)
	// A zombie's marker, and a deposed coordinator's, are refused.
	if _, err := l.AppendMarker(1, 2, record.Marker{Type: record.ControlAbort, CoordinatorEpoch: 5}, 0); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker at an older producer epoch: %v", err)
	}
	if _, err := l.AppendMarker(1, 3, record.Marker{Type: record.ControlAbort, CoordinatorEpoch: 4}, 0); !isErr(err, ErrCoordinatorFenced) {
		t.Fatalf("marker from an older coordinator epoch: %v", err)
	}
	// A marker at a new epoch (the coordinator's bump at the end of each
	// transaction): the next transaction starts at sequence 0 of it, and
	// a late batch of the old epoch is a zombie's.
	mustMarker(t, l, 1, 4, record.ControlAbort, 5)
	mustRefuse(t, l, txnBatch(1, 4, 1, 1, 1), ErrOutOfOrderSequence)
	mustRefuse(t, l, txnBatch(1, 3, 1, 1, 1), ErrInvalidProducerEpoch)
	mustAppend(t, l, txnBatch(1, 4, 0, 1, 1), 0)
	mustAppend(t, l, txnBatch(1, 4, 1, 1, 1), 0)
	// A marker for a producer the log has never seen ends nothing.
	mustMarker(t, l, 9, 0, record.ControlAbort, 5)
	wantAborted(t, l, 0, l.LogEndOffset(), nil)
}

// TestLogTxnInTransactionByEpoch: a producer's transaction is open here
// only at the epoch it was written at; at the next epoch (the
// coordinator's bump when it ends a transaction, before its marker is
// written here) it is not, so that the next transaction's first batch is
// checked with the coordinator rather than joined to it.
func TestLogTxnInTransactionByEpoch(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	if l.InTransaction(1, 3) {
		t.Fatal("open before any batch")
	}
	mustAppend(t, l, txnBatch(1, 3, 0, 1, 1), 0)
	if !l.InTransaction(1, 3) || l.InTransaction(1, 4) || l.InTransaction(2, 3) {
		t.Fatalf("open at epoch 3: %v, at 4: %v, producer 2: %v; want true, false, false",
			l.InTransaction(1, 3), l.InTransaction(1, 4), l.InTransaction(2, 3))
	}
	mustMarker(t, l, 1, 4, record.ControlAbort, 5)
	if l.InTransaction(1, 3) || l.InTransaction(1, 4) {
		t.Fatal("open after its marker")
	}
}

// TestLogTxnSurvivesRestart: an open transaction and the aborted index
// come back after a clean close and after losing the snapshots (replay
// from the log).
func TestLogTxnSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTest(t, dir, smallConfig(), 0)
	a1 := mustAppend(t, l, txnBatch(1, 0, 0, 3, 1), 0)
	mustAppend(t, l, txnBatch(2, 0, 0, 1, 1), 0)
	ab := mustMarker(t, l, 1, 0, record.ControlAbort, 0)
	open2 := l.FirstUnstableOffset()
	want := []AbortedTxn{{ProducerID: 1, FirstOffset: a1.FirstOffset, LastOffset: ab.FirstOffset, LastStableOffset: open2}}
	wantAborted(t, l, 0, l.LogEndOffset(), want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openTest(t, dir, smallConfig(), math.MaxInt64)
	wantUnstable(t, l, open2)
	wantAborted(t, l, 0, l.LogEndOffset(), want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Without snapshots nor index the log itself tells it all again.
	removeSuffixed(t, dir, snapshotSuffix, txnIndexSuffix)
	l = openTest(t, dir, smallConfig(), 0)
	defer l.Close()
	wantUnstable(t, l, open2)
	wantAborted(t, l, 0, l.LogEndOffset(), want)
	mustMarker(t, l, 2, 0, record.ControlCommit, 0)
	wantUnstable(t, l, math.MaxInt64)
}

func removeSuffixed(t testing.TB, dir string, suffixes ...string) {
	t.Helper()
	for _, suf := range suffixes {
		names, _ := filepath.Glob(filepath.Join(dir, "*"+suf))
		for _, n := range names {
			if err := os.Remove(n); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestLogTxnIndexTornTail: a torn or bad entry at the end of a txnindex
// file is cut at open, the good entries kept, in Kafka's 34-byte layout.
func TestLogTxnIndexTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTest(t, dir, smallConfig(), 0)
	a := mustAppend(t, l, txnBatch(1, 0, 0, 1, 1), 0)
	ab := mustMarker(t, l, 1, 0, record.ControlAbort, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*"+txnIndexSuffix))
	if len(paths) != 1 {
		t.Fatalf("txnindex files %v", paths)
	}
	path := paths[0]
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != txnIndexEntrySize || data[0] != 0 || data[1] != 0 {
		t.Fatalf("txnindex % x", data)
	}
	// A half entry, then a whole one past the log end.
	torn := append(append([]byte(nil), data...), data[:20]...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, smallConfig(), math.MaxInt64)
	want := []AbortedTxn{{ProducerID: 1, FirstOffset: a.FirstOffset, LastOffset: ab.FirstOffset, LastStableOffset: ab.FirstOffset + 1}}
	wantAborted(t, l, 0, l.LogEndOffset(), want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != txnIndexEntrySize {
		t.Fatalf("txnindex after cut: %v, %v", fi, err)
	}
	past := encodeTxnEntry(append([]byte(nil), data...), AbortedTxn{ProducerID: 1, FirstOffset: 50, LastOffset: 60, LastStableOffset: 61})
	if err := os.WriteFile(path, past, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, smallConfig(), math.MaxInt64)
	defer l.Close()
	wantAborted(t, l, 0, math.MaxInt64, want)
}

// TestLogTxnTruncation: a truncation below a marker reopens the
// transaction and forgets its abort.
func TestLogTxnTruncation(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	a := mustAppend(t, l, txnBatch(1, 0, 0, 1, 1), 0)
	ab := mustMarker(t, l, 1, 0, record.ControlAbort, 0)
	wantUnstable(t, l, math.MaxInt64)
	if err := l.Truncate(ab.FirstOffset); err != nil {
		t.Fatal(err)
	}
	wantUnstable(t, l, a.FirstOffset)
	wantAborted(t, l, 0, math.MaxInt64, nil)
	// The replayed marker comes back once appended again (as a follower).
	b := record.BuildMarker(1, 0, record.Marker{Type: record.ControlAbort}, 1)
	appendFollower(t, l, b)
	wantUnstable(t, l, math.MaxInt64)
	wantAborted(t, l, 0, math.MaxInt64, []AbortedTxn{{ProducerID: 1, FirstOffset: a.FirstOffset, LastOffset: ab.FirstOffset, LastStableOffset: ab.FirstOffset + 1}})
}

// TestLogTxnRetentionKeepsOpenTransaction: retention and DeleteRecords
// never cut into a transaction not yet ended.
func TestLogTxnRetentionKeepsOpenTransaction(t *testing.T) {
	t.Parallel()
	cfg := smallConfig()
	cfg.RetentionBytes = 1
	l := openTest(t, t.TempDir(), cfg, 0)
	defer l.Close()
	a := mustAppend(t, l, txnBatch(1, 0, 0, 1, 1), 0)
	for l.NumSegments() < 4 {
		mustAppend(t, l, makeBatch(5, 100, 1), 0)
	}
	if _, err := l.ApplyRetentionBelow(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() > a.FirstOffset {
		t.Fatalf("retention cut the open transaction: log start %d, transaction at %d", l.LogStartOffset(), a.FirstOffset)
	}
	if err := l.DeleteRecordsBefore(a.FirstOffset + 1); !isErr(err, ErrOpenTransaction) {
		t.Fatalf("delete records into the transaction: %v", err)
	}
	mustMarker(t, l, 1, 0, record.ControlCommit, 0)
	if _, err := l.ApplyRetentionBelow(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() <= a.FirstOffset {
		t.Fatalf("retention kept an ended transaction: log start %d", l.LogStartOffset())
	}
}

// TestLogTxnFollowerState: a follower appending the leader's batches
// holds the same transactions, so it can lead.
func TestLogTxnFollowerState(t *testing.T) {
	t.Parallel()
	leader := openTest(t, t.TempDir(), smallConfig(), 0)
	defer leader.Close()
	follower := openTest(t, t.TempDir(), smallConfig(), 0)
	defer follower.Close()
	mustAppend(t, leader, txnBatch(1, 0, 0, 2, 1), 0)
	mustAppend(t, leader, txnBatch(2, 0, 0, 2, 1), 0)
	mustMarker(t, leader, 1, 0, record.ControlAbort, 0)
	for _, b := range readAll(t, leader) {
		if _, err := follower.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
	}
	if follower.FirstUnstableOffset() != leader.FirstUnstableOffset() {
		t.Fatalf("follower first unstable %d, leader %d", follower.FirstUnstableOffset(), leader.FirstUnstableOffset())
	}
	wantAborted(t, follower, 0, math.MaxInt64, leader.AbortedTransactions(0, math.MaxInt64))
	if !reflect.DeepEqual(follower.Producers(), leader.Producers()) {
		t.Fatalf("follower producers %+v, leader %+v", follower.Producers(), leader.Producers())
	}
}

// TestProducerSnapshotCarriesTransactions: a snapshot holds each
// producer's open transaction and coordinator epoch, and version 1
// snapshots (before transactions) still read.
func TestProducerSnapshotCarriesTransactions(t *testing.T) {
	t.Parallel()
	ps := newProducerState(0)
	off := int64(0)
	apply := func(b []byte, m *record.Marker) {
		record.SetBaseOffset(b, off)
		h, _ := record.ParseHeader(b)
		ps.update(&h, m)
		off = h.NextOffset()
	}
	apply(txnBatch(1, 0, 0, 2, 1), nil)
	apply(producerBatch(2, 0, 0, 1, 1), nil)
	apply(txnBatch(3, 0, 0, 1, 1), nil)
	m := record.Marker{Type: record.ControlCommit, CoordinatorEpoch: 7}
	apply(record.BuildMarker(3, 1, m, 2), &m)
	data := encodeSnapshot(ps)
	got, err := decodeSnapshot(data, off)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ps) {
		t.Fatalf("decoded %+v, want %+v", got, ps)
	}
	if got.firstUnstable() != 0 || got.producers[3].coordinatorEpoch != 7 || len(got.producers[3].batches) != 0 {
		t.Fatalf("decoded transactions %+v, producer 3 %+v", got.txns, got.producers[3])
	}

	// The same state without transactions, in version 1.
	v1 := newProducerState(0)
	b := producerBatch(5, 2, 0, 3, 9)
	h, _ := record.ParseHeader(b)
	v1.update(&h, nil)
	v1.producers[5].coordinatorEpoch = -1
	enc := encodeSnapshot(v1)
	old := append([]byte(nil), enc[:snapshotHeaderSize+18]...)
	old = append(old, enc[snapshotHeaderSize+18+12:]...)
	old[0] = 1
	binary.BigEndian.PutUint32(old[1:], crc32.Checksum(old[snapshotCRCFrom:], castagnoli))
	gotV1, err := decodeSnapshot(old, v1.end)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotV1, v1) {
		t.Fatalf("version 1 decoded %+v, want %+v", gotV1.producers[5], v1.producers[5])
	}
}

// FuzzDecodeTxnIndex: any file contents give entries inside the
// segment's range, ascending by marker, each consistent; never a panic.
func FuzzDecodeTxnIndex(f *testing.F) {
	f.Add(encodeTxnEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 3, LastOffset: 7, LastStableOffset: 8}), int64(0), int64(100))
	f.Add([]byte{0, 0, 1}, int64(5), int64(10))
	f.Fuzz(func(t *testing.T, b []byte, base, end int64) {
		entries, cut := decodeTxnIndex(b, base, end)
		if len(entries)*txnIndexEntrySize > len(b) || (!cut && len(entries)*txnIndexEntrySize != len(b)) {
			t.Fatalf("%d entries of %d bytes, cut %v", len(entries), len(b), cut)
		}
		prev := int64(-1)
		for _, a := range entries {
			if a.LastOffset < base || a.LastOffset >= end || a.LastOffset <= prev || a.FirstOffset > a.LastOffset || a.ProducerID < 0 {
				t.Fatalf("entry %+v in [%d, %d) after %d", a, base, end, prev)
			}
			prev = a.LastOffset
		}
	})
}

// TestLogTxnIndexLSOBelowFirst: an abort while another producer's older
// transaction is open records an LSO below its own first offset; the
// entry survives a reopen (it was once taken for damage and the file
// cut, so read_committed readers saw the aborted records).
func TestLogTxnIndexLSOBelowFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTest(t, dir, smallConfig(), 0)
	older := mustAppend(t, l, txnBatch(1, 0, 0, 1, 1), 0) // 0, stays open
	a := mustAppend(t, l, txnBatch(2, 0, 0, 1, 1), 0)     // 1
	ab := mustMarker(t, l, 2, 0, record.ControlAbort, 0)  // 2
	want := []AbortedTxn{{ProducerID: 2, FirstOffset: a.FirstOffset, LastOffset: ab.FirstOffset, LastStableOffset: older.FirstOffset}}
	wantAborted(t, l, 0, math.MaxInt64, want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, smallConfig(), math.MaxInt64)
	defer l.Close()
	wantAborted(t, l, 0, math.MaxInt64, want)
}
