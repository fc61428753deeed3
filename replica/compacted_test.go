package replica

import (
	"testing"

	"github.com/quirelog/quire/record"
)

// RecordTimestamp (group lag in seconds) finds the first record at or
// after an offset in a compacted log too, where the batch read first may
// hold none (an idempotent producer's last batch the cleaner left empty).
func TestReplicaRecordTimestampAcrossEmptyBatch(t *testing.T) {
	rm := testReplicaManager(t)
	if err := rm.makeLeader("t", 0, 3, []int32{1}); err != nil {
		t.Fatal(err)
	}
	p, _ := rm.Partition("t", 0)
	first := record.NewBuilder(record.None)
	first.Append(1000, []byte("a"), []byte("1"), nil)
	first.Append(1001, []byte("b"), []byte("2"), nil)
	b0 := first.Build()
	gone := record.NewBuilder(record.None)
	for i := 0; i < 4; i++ {
		gone.Append(2000, []byte("c"), []byte("x"), nil)
	}
	b1 := gone.Build()
	record.SetBaseOffset(b1, 2)
	empty := record.EmptyBatch(nil, b1)
	for _, b := range [][]byte{b0, empty} {
		record.SetPartitionLeaderEpoch(b, 3)
	}
	if _, err := p.log.AppendAsFollower(append(b0, empty...)); err != nil {
		t.Fatal(err)
	}
	last := record.NewBuilder(record.None)
	last.Append(3000, []byte("c"), []byte("3"), nil)
	if info, err := p.appendAsLeader(last.Build(), -1, 1); err != nil || info.FirstOffset != 6 {
		t.Fatalf("append: %+v, %v", info, err)
	}
	for _, c := range []struct {
		offset, ts int64
		ok         bool
	}{{0, 1000, true}, {1, 1001, true}, {2, 3000, true}, {5, 3000, true}, {6, 3000, true}, {7, -1, false}} {
		ts, ok, err := p.RecordTimestamp(c.offset)
		if err != nil || ok != c.ok || (ok && ts != c.ts) {
			t.Fatalf("RecordTimestamp(%d) = %d, %v, %v; want %d, %v", c.offset, ts, ok, err, c.ts, c.ok)
		}
	}
}
