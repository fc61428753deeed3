package storage

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/quirelog/quire/record"
)

// producerBatch builds a batch of n records from producer pid at epoch,
// its first record at sequence seq, with timestamp ts.
func producerBatch(pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	b := record.NewBuilder(record.None)
	b.SetProducer(pid, epoch, seq)
	for i := 0; i < n; i++ {
		b.Append(ts, []byte(fmt.Sprintf("p%d-s%d", pid, seq)), []byte("value"), nil)
	}
	return b.Build()
}

// appendFollower appends batch at the log end as a follower would, with
// leader epoch 0.
func appendFollower(t testing.TB, l *Log, batch []byte) AppendInfo {
	t.Helper()
	record.SetBaseOffset(batch, l.LogEndOffset())
	record.SetPartitionLeaderEpoch(batch, 0)
	info, err := l.AppendAsFollower(batch)
	if err != nil {
		t.Fatalf("follower append: %v", err)
	}
	return info
}

// mustDuplicate checks that appending batch as leader is answered as a
// duplicate of orig and appends nothing.
func mustDuplicate(t testing.TB, l *Log, batch []byte, orig AppendInfo) {
	t.Helper()
	leo := l.LogEndOffset()
	info, err := l.AppendAsLeader(batch, 0)
	if err != nil {
		t.Fatalf("duplicate append: %v", err)
	}
	if !info.Duplicate || info.FirstOffset != orig.FirstOffset || info.LastOffset != orig.LastOffset ||
		info.MaxTimestamp != orig.MaxTimestamp {
		t.Fatalf("duplicate answered %+v, original %+v", info, orig)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("duplicate appended: log end %d, was %d", l.LogEndOffset(), leo)
	}
}

func mustRefuse(t testing.TB, l *Log, batch []byte, want error) {
	t.Helper()
	leo := l.LogEndOffset()
	info, err := l.AppendAsLeader(batch, 0)
	if !isErr(err, want) {
		t.Fatalf("append: %+v, %v; want %v", info, err, want)
	}
	if info.Duplicate || l.LogEndOffset() != leo {
		t.Fatalf("refused append changed the log: %+v, log end %d, was %d", info, l.LogEndOffset(), leo)
	}
	h, _ := record.ParseHeader(batch)
	if h.BaseOffset != 0 {
		t.Fatalf("refused append assigned offsets to the caller's batch: %d", h.BaseOffset)
	}
}

// TestProducerDuplicateOfEachOfLastFive: a retry of any of a producer's
// latest five batches gets its original offsets; an older one is out of
// order (no duplicate explanation is left).
func TestProducerDuplicateOfEachOfLastFive(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	mustAppend(t, l, makeBatch(2, 10, 1), 0) // a plain batch first: offsets differ from sequences
	var infos []AppendInfo
	for i := 0; i < 8; i++ {
		infos = append(infos, mustAppend(t, l, producerBatch(7, 0, int32(3*i), 3, int64(100+i)), 0))
	}
	for i := 3; i < 8; i++ {
		mustDuplicate(t, l, producerBatch(7, 0, int32(3*i), 3, int64(100+i)), infos[i])
	}
	for i := 0; i < 3; i++ {
		mustRefuse(t, l, producerBatch(7, 0, int32(3*i), 3, int64(100+i)), ErrOutOfOrderSequence)
	}
	// Same base sequence, other length: not the same batch.
	mustRefuse(t, l, producerBatch(7, 0, 21, 2, 107), ErrOutOfOrderSequence)
	info := mustAppend(t, l, producerBatch(7, 0, 24, 1, 108), 0)
	if info.Duplicate || info.FirstOffset != infos[7].LastOffset+1 {
		t.Fatalf("next batch: %+v", info)
	}
}

func TestProducerSequenceRules(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	mustAppend(t, l, producerBatch(1, 3, 0, 2, 10), 0)
	mustAppend(t, l, producerBatch(1, 3, 2, 2, 11), 0)

	// A gap, at the producer's epoch.
	mustRefuse(t, l, producerBatch(1, 3, 5, 1, 12), ErrOutOfOrderSequence)
	// An older epoch.
	mustRefuse(t, l, producerBatch(1, 2, 4, 1, 12), ErrInvalidProducerEpoch)
	mustRefuse(t, l, producerBatch(1, 2, 0, 1, 12), ErrInvalidProducerEpoch)
	// A new epoch must start at 0.
	mustRefuse(t, l, producerBatch(1, 4, 4, 1, 12), ErrOutOfOrderSequence)
	// An unknown producer at a sequence other than 0.
	mustRefuse(t, l, producerBatch(2, 0, 9, 1, 12), ErrUnknownProducerID)
	// A negative sequence or epoch from a producer with an id.
	mustRefuse(t, l, producerBatch(1, 3, -1, 1, 12), ErrOutOfOrderSequence)
	mustRefuse(t, l, producerBatch(1, -1, 4, 1, 12), ErrInvalidProducerEpoch)

	mustAppend(t, l, producerBatch(2, 0, 0, 1, 12), 0)
	b4 := mustAppend(t, l, producerBatch(1, 4, 0, 1, 13), 0)
	// The epoch bump forgot the old epoch's batches.
	mustRefuse(t, l, producerBatch(1, 3, 2, 2, 11), ErrInvalidProducerEpoch)
	mustDuplicate(t, l, producerBatch(1, 4, 0, 1, 13), b4)
	want := []ProducerInfo{
		{ProducerID: 1, ProducerEpoch: 4, LastSequence: 0, LastTimestamp: 13, LastOffset: b4.LastOffset,
			CoordinatorEpoch: -1, TxnStartOffset: -1},
		{ProducerID: 2, ProducerEpoch: 0, LastSequence: 0, LastTimestamp: 12, LastOffset: b4.FirstOffset - 1,
			CoordinatorEpoch: -1, TxnStartOffset: -1},
	}
	if got := l.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("producers %+v, want %+v", got, want)
	}
}

// TestProducerNonIdempotentBypass: batches without a producer id are
// never checked, repeated or not.
func TestProducerNonIdempotentBypass(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	b := producerBatch(-1, -1, -1, 3, 5)
	for i := 0; i < 3; i++ {
		info := mustAppend(t, l, append([]byte(nil), b...), 0)
		if info.Duplicate || info.FirstOffset != int64(3*i) {
			t.Fatalf("append %d: %+v", i, info)
		}
	}
	if got := l.Producers(); len(got) != 0 {
		t.Fatalf("producers %+v", got)
	}
}

func TestProducerSequenceWrapAround(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	// A follower takes any sequence: this producer is far along.
	appendFollower(t, l, producerBatch(5, 0, math.MaxInt32-4, 2, 1))
	// A batch across the wrap: MaxInt32-2, MaxInt32-1, MaxInt32, 0.
	across := mustAppend(t, l, producerBatch(5, 0, math.MaxInt32-2, 4, 2), 0)
	if got := l.Producers()[0].LastSequence; got != 0 {
		t.Fatalf("last sequence %d after the wrap, want 0", got)
	}
	mustDuplicate(t, l, producerBatch(5, 0, math.MaxInt32-2, 4, 2), across)
	mustRefuse(t, l, producerBatch(5, 0, 0, 1, 3), ErrOutOfOrderSequence)
	mustAppend(t, l, producerBatch(5, 0, 1, 1, 3), 0)
	// A batch ending exactly at MaxInt32 is followed by 0.
	appendFollower(t, l, producerBatch(6, 0, math.MaxInt32-1, 2, 4))
	mustRefuse(t, l, producerBatch(6, 0, math.MaxInt32, 1, 5), ErrOutOfOrderSequence)
	mustAppend(t, l, producerBatch(6, 0, 0, 1, 5), 0)
	if got := incrementSequence(math.MaxInt32, 1); got != 0 {
		t.Fatalf("MaxInt32+1 = %d", got)
	}
	if got := incrementSequence(math.MaxInt32-1, 5); got != 3 {
		t.Fatalf("MaxInt32-1+5 = %d", got)
	}
}

// TestProducerMultiBatchAppend: batches of one append are checked in
// order against each other; an append mixing retried and new batches is
// refused whole.
func TestProducerMultiBatchAppend(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), smallConfig(), 0)
	defer l.Close()
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	first := mustAppend(t, l, cat(producerBatch(1, 0, 0, 2, 1), producerBatch(1, 0, 2, 2, 1), producerBatch(2, 0, 0, 1, 1)), 0)
	mustDuplicate(t, l, cat(producerBatch(1, 0, 0, 2, 1), producerBatch(1, 0, 2, 2, 1), producerBatch(2, 0, 0, 1, 1)), first)
	mustRefuse(t, l, cat(producerBatch(1, 0, 2, 2, 1), producerBatch(1, 0, 4, 1, 1)), ErrDuplicateSequence)
	mustRefuse(t, l, cat(producerBatch(1, 0, 4, 1, 1), producerBatch(1, 0, 6, 1, 1)), ErrOutOfOrderSequence)
	mustRefuse(t, l, cat(producerBatch(1, 1, 0, 1, 1), producerBatch(1, 0, 4, 1, 1)), ErrInvalidProducerEpoch)
	mustRefuse(t, l, cat(producerBatch(1, 0, 4, 1, 1), producerBatch(1, 1, 3, 1, 1)), ErrOutOfOrderSequence)
	mustAppend(t, l, cat(producerBatch(1, 0, 4, 1, 1), producerBatch(1, 1, 0, 1, 1)), 0)
	if got := l.Producers()[0]; got.ProducerEpoch != 1 || got.LastSequence != 0 {
		t.Fatalf("producer 1: %+v", got)
	}
}

func TestProducerExpiry(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.UnixMilli(1_000_000)}
	cfg := smallConfig()
	cfg.ProducerIDExpirationMs = 60_000
	l, err := OpenLog(t.TempDir(), "t", 0, cfg, 0, Options{FS: noSyncFS{}, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustAppend(t, l, producerBatch(1, 0, 0, 1, 1_000_000), 0)
	mustAppend(t, l, producerBatch(2, 0, 0, 1, 1_030_000), 0)
	clk.t = time.UnixMilli(1_059_999)
	if n := l.ExpireProducers(); n != 0 {
		t.Fatalf("expired %d before producer.id.expiration.ms", n)
	}
	clk.t = time.UnixMilli(1_060_000)
	if n := l.ExpireProducers(); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	if got := l.Producers(); len(got) != 1 || got[0].ProducerID != 2 {
		t.Fatalf("producers %+v", got)
	}
	mustRefuse(t, l, producerBatch(1, 0, 1, 1, 1_060_000), ErrUnknownProducerID)
	mustAppend(t, l, producerBatch(2, 0, 1, 1, 1_060_000), 0)
	// A producer starting over at 0 after expiry is welcome.
	mustAppend(t, l, producerBatch(1, 1, 0, 1, 1_060_000), 0)

	// An expired producer stays expired across a restart, though its
	// batches are still in the log.
	clk.t = time.UnixMilli(1_200_000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := OpenLog(l.Dir(), "t", 0, cfg, math.MaxInt64, Options{FS: noSyncFS{}, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := l2.Producers(); len(got) != 0 {
		t.Fatalf("producers after restart %+v", got)
	}
	if err := (LogConfig{}).Validate(); !isErr(err, ErrInvalidConfig) {
		t.Fatalf("zero config: %v", err)
	}
}

// TestProducerStateCheckTable runs the rules on the state machine alone.
func TestProducerStateCheckTable(t *testing.T) {
	t.Parallel()
	ps := newProducerState(0)
	var off int64
	apply := func(pid int64, epoch int16, seq int32, n int) {
		b := producerBatch(pid, epoch, seq, n, 1)
		record.SetBaseOffset(b, off)
		h, _ := record.ParseHeader(b)
		ps.update(&h, nil)
		off = h.NextOffset()
	}
	apply(1, 0, 0, 5) // sequences 0-4, offsets 0-4
	apply(1, 0, 5, 5) // 5-9, offsets 5-9
	cases := []struct {
		name        string
		epoch       int16
		seq         int32
		n           int
		want        error
		dup         bool
		first, last int64
	}{
		{name: "next", epoch: 0, seq: 10, n: 1},
		{name: "retry of the first", epoch: 0, seq: 0, n: 5, dup: true, first: 0, last: 4},
		{name: "retry of the second", epoch: 0, seq: 5, n: 5, dup: true, first: 5, last: 9},
		{name: "part of the first", epoch: 0, seq: 0, n: 3, want: ErrOutOfOrderSequence},
		{name: "gap", epoch: 0, seq: 11, n: 1, want: ErrOutOfOrderSequence},
		{name: "old epoch", epoch: -1, seq: 10, n: 1, want: ErrInvalidProducerEpoch},
		{name: "new epoch at 0", epoch: 1, seq: 0, n: 1},
		{name: "new epoch not at 0", epoch: 1, seq: 10, n: 1, want: ErrOutOfOrderSequence},
	}
	for _, c := range cases {
		b := producerBatch(1, c.epoch, c.seq, c.n, 1)
		res, err := ps.check(b, 1)
		// The general path (any number of batches) answers the same.
		if res2, err2 := ps.check(b, 0); res2 != res || (err2 == nil) != (err == nil) || (err != nil && err2.Error() != err.Error()) {
			t.Errorf("%s: one-batch path %+v %v, general path %+v %v", c.name, res, err, res2, err2)
		}
		if !isErr(err, c.want) || (err == nil && c.want != nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
			continue
		}
		if dup := res.duplicates > 0; dup != c.dup || (dup && (res.dupFirst != c.first || res.dupLast != c.last)) {
			t.Errorf("%s: %+v", c.name, res)
		}
	}
}
