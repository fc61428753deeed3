package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/storage"
)

func txnTestBatch(n int, id int64, epoch int16, seq int32) []byte {
	b := record.NewBuilder(record.None)
	b.SetProducer(id, epoch, seq)
	b.SetTransactional(true)
	for i := 0; i < n; i++ {
		b.Append(time.Now().UnixMilli(), nil, []byte("value"), nil)
	}
	return b.Build()
}

// TestReplicaTxnReadCommitted: a read_committed read stops at the last
// stable offset, a marker replicated to the ISR moves it, and an aborted
// transaction comes with the read that overlaps it.
func TestReplicaTxnReadCommitted(t *testing.T) {
	rm := testReplicaManager(t)
	if err := rm.makeLeader("t", 0, 3, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	p, _ := rm.Partition("t", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := p.Append(txnTestBatch(2, 7, 0, 0), -1) // 0-1
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Append(idemTestBatch(1, 8, 0), -1) // 2, not transactional
	if err != nil {
		t.Fatal(err)
	}
	p.updateFollowerLEO(2, b.LastOffset+1)
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("hw %d", hw)
	}
	if lso := p.LastStableOffset(); lso != a.FirstOffset {
		t.Fatalf("lso %d with an open transaction at %d", lso, a.FirstOffset)
	}
	res, hw, lso, aborted, err := p.ReadCommittedAppend(nil, 0, 1<<20)
	if err != nil || len(res.Batches) != 0 || hw != 3 || lso != 0 || aborted != nil {
		t.Fatalf("read_committed under an open transaction: %d bytes, hw %d, lso %d, %v, %v", len(res.Batches), hw, lso, aborted, err)
	}

	// The abort marker counts once the follower has it.
	done := make(chan error, 1)
	var off int64
	go func() {
		var err error
		off, err = p.WriteMarker(ctx, 7, 0, record.Marker{Type: record.ControlAbort, CoordinatorEpoch: 1})
		done <- err
	}()
	waitLEO(t, p, b.LastOffset+2)
	p.updateFollowerLEO(2, p.LogEndOffset())
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if off != 3 || p.LastStableOffset() != 4 {
		t.Fatalf("marker at %d, lso %d", off, p.LastStableOffset())
	}
	res, _, lso, aborted, err = p.ReadCommittedAppend(nil, 0, 1<<20)
	if err != nil || res.HighOffset != 4 || lso != 4 {
		t.Fatalf("read_committed after the abort: high %d, lso %d, %v", res.HighOffset, lso, err)
	}
	want := storage.AbortedTxn{ProducerID: 7, FirstOffset: 0, LastOffset: 3, LastStableOffset: 4}
	if len(aborted) != 1 || aborted[0] != want {
		t.Fatalf("aborted %+v, want %+v", aborted, want)
	}
	// A zombie marker is refused; a follower does not append markers.
	if _, err := p.AppendMarker(7, 0, record.Marker{Type: record.ControlCommit, CoordinatorEpoch: 0}); !errors.Is(err, storage.ErrCoordinatorFenced) {
		t.Fatalf("marker of a fenced coordinator: %v", err)
	}
	if err := rm.makeFollower("t", 0, 2, 4, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	var nl *NotLeaderError
	if _, err := p.AppendMarker(7, 0, record.Marker{Type: record.ControlCommit, CoordinatorEpoch: 1}); !errors.As(err, &nl) {
		t.Fatalf("marker on a follower: %v", err)
	}
}

func waitLEO(t *testing.T, p *Partition, want int64) {
	t.Helper()
	ch := make(chan struct{}, 1)
	p.watchLEO(ch)
	defer p.unwatchLEO(ch)
	for p.LogEndOffset() < want {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("log end %d, waiting for %d", p.LogEndOffset(), want)
		}
	}
}
