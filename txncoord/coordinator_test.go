package txncoord

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/txn"
)

// fsmLog is the metadata log of one controller without raft: each
// command is applied to a real FSM at the next index.
type fsmLog struct {
	mu    sync.Mutex
	fsm   *metadata.FSM
	index uint64
	term  atomic.Uint64
}

func newFSMLog(t *testing.T) *fsmLog {
	t.Helper()
	f, err := metadata.OpenFSM(filepath.Join(t.TempDir(), "metadata.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	l := &fsmLog{fsm: f}
	l.term.Store(1)
	ctx := context.Background()
	for _, cmd := range []*pb.Command{
		{Cmd: &pb.Command_FeatureLevel{FeatureLevel: &pb.FeatureLevel{Name: metadata.MetadataVersionFeature, Level: metadata.MetadataVersionTransactions}}},
		{Cmd: &pb.Command_CreateTopic{CreateTopic: &pb.CreateTopic{Name: "t", TopicId: "id-t", Partitions: []*pb.PartitionAssignment{
			{Partition: 0, Replicas: []int32{1}, Leader: 1, Isr: []int32{1}}, {Partition: 1, Replicas: []int32{1}, Leader: 1, Isr: []int32{1}}}}}},
	} {
		if _, err := l.Apply(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func (l *fsmLog) Term() uint64                  { return l.term.Load() }
func (l *fsmLog) Image() *metadata.Image        { return l.fsm.Image() }
func (l *fsmLog) Barrier(context.Context) error { return nil }
func (l *fsmLog) LevelRising(*pb.Command) (int32, bool) {
	return metadata.MetadataVersionTransactions, false
}
func (l *fsmLog) Apply(_ context.Context, cmd *pb.Command) (any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.index++
	resp := l.fsm.ApplyCommand(cmd, l.index)
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

// markerLog records the markers written; while fail is set it refuses
// them.
type markerLog struct {
	mu      sync.Mutex
	written []txn.Marker
	fail    error
}

func (m *markerLog) WriteMarkers(_ context.Context, mk txn.Marker) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.written = append(m.written, mk)
	return nil
}

func (m *markerLog) all() []txn.Marker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]txn.Marker(nil), m.written...)
}

type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

func setup(t *testing.T) (*Coordinator, *fsmLog, *markerLog, *fakeClock) {
	t.Helper()
	l := newFSMLog(t)
	m := &markerLog{}
	clk := &fakeClock{}
	clk.ms.Store(1000)
	return New(l, m, noGroups{}, Config{MaxTimeoutMs: 60000, Clock: clk}), l, m, clk
}

// noGroups is a group coordinator whose groups have no members: offsets
// sent as a member are refused as from an unknown one.
type noGroups struct{}

func (noGroups) ValidateTxnCommit(_ context.Context, id string, m txn.Member, _ []txn.TopicPartition) error {
	if m == (txn.Member{}) {
		return nil
	}
	return fmt.Errorf("%w: member %q is not in group %q", group.ErrUnknownMemberID, m.ID, id)
}

func initProducer(t *testing.T, co *Coordinator, id string, bump bool) txn.Producer {
	t.Helper()
	got, err := co.InitProducer(context.Background(), txn.InitRequest{ID: id, TimeoutMs: 10000, ProducerID: -1, ProducerEpoch: -1, BumpPerTransaction: bump})
	if err != nil {
		t.Fatalf("init %q: %v", id, err)
	}
	return txn.Producer{ID: id, PID: got.ProducerID, Epoch: got.ProducerEpoch}
}

var (
	t0 = txn.TopicPartition{Topic: "t", Partition: 0}
	t1 = txn.TopicPartition{Topic: "t", Partition: 1}
)

// TestTxnCoordCommitWithOffsets: a transaction's markers go to its
// partitions, and its staged offsets are committed when it completes,
// not before.
func TestTxnCoordCommitWithOffsets(t *testing.T) {
	co, l, m, _ := setup(t)
	ctx := context.Background()
	p := initProducer(t, co, "tx", false)
	if err := co.AddPartitions(ctx, p, []txn.TopicPartition{t0, t1}, false); err != nil {
		t.Fatal(err)
	}
	if err := co.AddPartitions(ctx, p, []txn.TopicPartition{{Topic: "nope", Partition: 0}}, false); !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("add of an unknown topic: %v", err)
	}
	if err := co.AddGroup(ctx, p, "g"); err != nil {
		t.Fatal(err)
	}
	if err := co.CommitOffsets(ctx, p, "g", txn.Member{}, []txn.Offset{{Topic: "t", Partition: 0, Offset: 42, LeaderEpoch: -1}}, false); err != nil {
		t.Fatal(err)
	}
	if offs := l.Image().Offsets("g"); len(offs) != 0 {
		t.Fatalf("offsets visible before the commit: %+v", offs)
	}
	end, err := co.End(ctx, p, true, false)
	if err != nil || end.ProducerEpoch != p.Epoch {
		t.Fatalf("end: %+v, %v", end, err)
	}
	want := []txn.Marker{{ProducerID: p.PID, ProducerEpoch: p.Epoch, Commit: true, CoordinatorEpoch: 1, Partitions: []txn.TopicPartition{t0, t1}}}
	if got := m.all(); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers %+v, want %+v", got, want)
	}
	st, _ := l.Image().Transaction("tx")
	if st.State != txn.CompleteCommit {
		t.Fatalf("state %s", st.State)
	}
	if offs := l.Image().Offsets("g"); len(offs) != 1 || offs[0].Offset != 42 {
		t.Fatalf("offsets after the commit: %+v", offs)
	}
	// A retry of the End is answered as it was.
	if again, err := co.End(ctx, p, true, false); err != nil || again.State != txn.CompleteCommit {
		t.Fatalf("retried end: %+v, %v", again, err)
	}
}

// TestTxnCoordFencing: a second producer with the same id fences the
// first; over an ongoing transaction it aborts it first, with the
// bumped epoch on the markers, and asks the producer to retry.
func TestTxnCoordFencing(t *testing.T) {
	co, _, m, _ := setup(t)
	ctx := context.Background()
	old := initProducer(t, co, "tx", false)
	if err := co.AddPartitions(ctx, old, []txn.TopicPartition{t0}, false); err != nil {
		t.Fatal(err)
	}
	_, err := co.InitProducer(ctx, txn.InitRequest{ID: "tx", TimeoutMs: 10000, ProducerID: -1, ProducerEpoch: -1})
	if !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("init over an ongoing transaction: %v", err)
	}
	want := []txn.Marker{{ProducerID: old.PID, ProducerEpoch: old.Epoch + 1, CoordinatorEpoch: 1, Partitions: []txn.TopicPartition{t0}}}
	if got := m.all(); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers %+v, want %+v", got, want)
	}
	p := initProducer(t, co, "tx", false)
	if p.PID != old.PID || p.Epoch != old.Epoch+2 {
		t.Fatalf("new producer %+v, old %+v", p, old)
	}
	if err := co.AddPartitions(ctx, old, []txn.TopicPartition{t0}, false); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("fenced producer's add: %v", err)
	}
	if _, err := co.End(ctx, old, true, false); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("fenced producer's end: %v", err)
	}
	other := initProducer(t, co, "other", false)
	if other.PID == p.PID {
		t.Fatalf("two transactional ids share producer id %d", p.PID)
	}
}

// TestTxnCoordFailoverCompletes: a transaction decided while its markers
// cannot be written stays prepared; the next controller (a new term, a
// new coordinator over the same log) writes them with its own epoch and
// completes it.
func TestTxnCoordFailoverCompletes(t *testing.T) {
	co, l, m, _ := setup(t)
	ctx := context.Background()
	p := initProducer(t, co, "tx", true)
	if err := co.AddPartitions(ctx, p, []txn.TopicPartition{t0}, false); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.fail = errors.New("leader unreachable")
	m.mu.Unlock()
	end, err := co.End(ctx, p, true, false)
	if err != nil || end.State != txn.PrepareCommit || end.ProducerEpoch != p.Epoch+1 {
		t.Fatalf("end while markers fail: %+v, %v", end, err)
	}
	// The next transaction waits for this one.
	next := txn.Producer{ID: "tx", PID: end.ProducerID, Epoch: end.ProducerEpoch}
	if err := co.AddPartitions(ctx, next, []txn.TopicPartition{t0}, false); !errors.Is(err, txn.ErrConcurrentTransactions) {
		t.Fatalf("add while the previous transaction is being ended: %v", err)
	}
	m.mu.Lock()
	m.fail = nil
	m.mu.Unlock()
	l.term.Store(2)
	successor := New(l, m, noGroups{}, Config{MaxTimeoutMs: 60000})
	successor.sweep(ctx)
	want := []txn.Marker{{ProducerID: p.PID, ProducerEpoch: p.Epoch + 1, Commit: true, CoordinatorEpoch: 2, Partitions: []txn.TopicPartition{t0}}}
	if got := m.all(); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers %+v, want %+v", got, want)
	}
	if st, _ := l.Image().Transaction("tx"); st.State != txn.CompleteCommit {
		t.Fatalf("state after the successor's sweep: %s", st.State)
	}
	if err := successor.AddPartitions(ctx, next, []txn.TopicPartition{t0}, false); err != nil {
		t.Fatalf("next transaction: %v", err)
	}
}

// TestTxnCoordTimeout: a transaction past its timeout is aborted with its
// producer's epoch bumped, fencing it.
func TestTxnCoordTimeout(t *testing.T) {
	co, l, m, clk := setup(t)
	ctx := context.Background()
	p := initProducer(t, co, "tx", false)
	if err := co.AddPartitions(ctx, p, []txn.TopicPartition{t1}, false); err != nil {
		t.Fatal(err)
	}
	clk.ms.Add(10000)
	co.sweep(ctx)
	if len(m.all()) != 0 {
		t.Fatalf("aborted at its timeout: %+v", m.all())
	}
	clk.ms.Add(1)
	co.sweep(ctx)
	want := []txn.Marker{{ProducerID: p.PID, ProducerEpoch: p.Epoch + 1, CoordinatorEpoch: 1, Partitions: []txn.TopicPartition{t1}}}
	if got := m.all(); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers %+v, want %+v", got, want)
	}
	if st, _ := l.Image().Transaction("tx"); st.State != txn.CompleteAbort {
		t.Fatalf("state %s", st.State)
	}
	if _, err := co.End(ctx, p, true, false); !errors.Is(err, txn.ErrProducerFenced) {
		t.Fatalf("end after the timeout: %v", err)
	}
	if _, err := co.InitProducer(ctx, txn.InitRequest{ID: "tx", TimeoutMs: 60001, ProducerID: -1, ProducerEpoch: -1}); !errors.Is(err, txn.ErrInvalidTimeout) {
		t.Fatalf("init above the max timeout: %v", err)
	}
}

// TestTxnCoordIDExpiry: the sweep forgets, through the metadata log, a
// transactional id with no transaction in progress once it has not
// changed for transactional.id.expiration.ms; an id with a transaction
// open, or one ended since, stays. An id forgotten comes back with a new
// producer id, and its old producer is fenced.
func TestTxnCoordIDExpiry(t *testing.T) {
	l := newFSMLog(t)
	clk := &fakeClock{}
	clk.ms.Store(1000)
	// Transactions time out after 10 s, ids after 5 s.
	co := New(l, &markerLog{}, noGroups{}, Config{MaxTimeoutMs: 60000, IDExpiration: 5 * time.Second, Clock: clk})
	ctx := context.Background()
	idle := initProducer(t, co, "idle", false)
	busy := initProducer(t, co, "busy", false)
	if err := co.AddPartitions(ctx, busy, []txn.TopicPartition{t0}, false); err != nil {
		t.Fatal(err)
	}
	recent := initProducer(t, co, "recent", false)
	clk.ms.Add(4999)
	if err := co.AddPartitions(ctx, recent, []txn.TopicPartition{t1}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := co.End(ctx, recent, true, false); err != nil {
		t.Fatal(err)
	}
	co.sweep(ctx)
	if _, ok := l.Image().Transaction("idle"); !ok {
		t.Fatal("idle forgotten before its expiration")
	}
	clk.ms.Add(1) // idle unchanged for 5 s
	co.sweep(ctx)
	ids := func() []string {
		var out []string
		for _, t := range l.Image().Transactions() {
			out = append(out, t.ID)
		}
		return out
	}
	if got := ids(); !reflect.DeepEqual(got, []string{"busy", "recent"}) {
		t.Fatalf("ids after the sweep: %v, want busy (ongoing) and recent (ended 1 ms ago)", got)
	}
	if _, err := co.End(ctx, idle, true, false); !errors.Is(err, txn.ErrInvalidProducerIDMapping) {
		t.Fatalf("the forgotten id's producer ends a transaction: %v", err)
	}
	again := initProducer(t, co, "idle", false)
	if again.PID == idle.PID {
		t.Fatalf("the forgotten id came back with its old producer id %d", idle.PID)
	}
	// busy's transaction times out (10 s after it began) and is aborted,
	// which is a change: the id stays 5 s more. idle and recent, unchanged
	// for over 5 s, go.
	clk.ms.Add(5001)
	co.sweep(ctx)
	if st, ok := l.Image().Transaction("busy"); !ok || st.State != txn.CompleteAbort {
		t.Fatalf("busy after its timeout: %+v, %v; want it aborted and kept", st, ok)
	}
	if got := ids(); !reflect.DeepEqual(got, []string{"busy"}) {
		t.Fatalf("ids after busy's timeout: %v, want busy only", got)
	}
	clk.ms.Add(5000)
	co.sweep(ctx)
	if got := ids(); len(got) != 0 {
		t.Fatalf("ids: %v, want none", got)
	}
}
