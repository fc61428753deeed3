package sharegroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/quirelog/quire/internal/poll"
	"github.com/quirelog/quire/share"
)

var errNotLeader = errors.New("not the leader")

// metaStore stands for the metadata log: who leads each partition at
// which epoch, and the states saved, fenced as the log fences them.
type metaStore struct {
	mu      sync.Mutex
	leaders map[TopicPartition][2]int32 // node, epoch
	saved   map[string]SavedState
	gate    chan struct{} // when set, Save waits for it
	saving  chan struct{} // when set, Save says it has begun
	// lostAnswer: Save stores the states, then answers an error (the
	// entry committed, its answer lost in a leadership change).
	lostAnswer bool
}

func newMetaStore() *metaStore {
	return &metaStore{leaders: map[TopicPartition][2]int32{}, saved: map[string]SavedState{}}
}

func (m *metaStore) lead(tp TopicPartition, node, epoch int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leaders[tp] = [2]int32{node, epoch}
}

// nodeStore is one node's view of the store.
type nodeStore struct {
	m    *metaStore
	node int32
}

func skey(group string, tp TopicPartition) string {
	return fmt.Sprintf("%s/%s/%d", group, tp.Topic, tp.Partition)
}

func (s nodeStore) Lease(tp TopicPartition) (Lease, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	l := s.m.leaders[tp]
	if l[0] != s.node {
		return Lease{}, errNotLeader
	}
	return Lease{Epoch: l[1], Incarnation: "id-" + tp.Topic}, nil
}

func (s nodeStore) Load(group string, tp TopicPartition, lease Lease) (SavedState, bool, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	st, ok := s.m.saved[skey(group, tp)]
	if !ok || st.Lease.Incarnation != lease.Incarnation {
		return SavedState{}, false, nil
	}
	return st, true, nil
}

func (s nodeStore) Save(ctx context.Context, states []SavedState) ([]error, error) {
	if s.m.saving != nil {
		s.m.saving <- struct{}{}
	}
	if s.m.gate != nil {
		<-s.m.gate
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	out := make([]error, len(states))
	for i, st := range states {
		if l := s.m.leaders[st.TopicPartition]; l[0] != s.node || l[1] != st.Lease.Epoch {
			out[i] = errNotLeader
			continue
		}
		s.m.saved[skey(st.Group, st.TopicPartition)] = st
	}
	if s.m.lostAnswer {
		return nil, errLostAnswer
	}
	return out, nil
}

var errLostAnswer = errors.New("the save's answer was lost")

func newNode(t *testing.T, m *metaStore, node int32) *Coordinator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ResetEarliest = true
	cfg.Store = nodeStore{m, node}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func persist(t *testing.T, c *Coordinator, tps ...TopicPartition) {
	t.Helper()
	for i, err := range c.Persist(context.Background(), "g", tps) {
		if err != nil {
			t.Fatalf("persist %v: %v", tps[i], err)
		}
	}
}

func offsets(rs []share.AcquiredRange) []int64 {
	var out []int64
	for _, r := range rs {
		for o := r.First; o <= r.Last; o++ {
			out = append(out, o)
		}
	}
	return out
}

// TestSharePersistFailover: node 1 leads, a member accepts some records,
// releases one and holds others when node 2 takes over. Node 2 restores
// the saved state: nothing accepted is delivered again, the held records
// come back with a raised delivery count, the rest follow; node 1's saves
// are refused from then on, and its state is restored again when it
// leads once more.
func TestSharePersistFailover(t *testing.T) {
	m := newMetaStore()
	m.lead(tp, 1, 0)
	log := &memLog{hw: 10, keys: []string{"a", "b"}}
	n1 := newNode(t, m, 1)
	join(t, n1, "x")
	f, err := n1.Acquire(t0, "g", "x", tp, 6, log)
	if err != nil || !slices.Equal(offsets(f.Acquired), []int64{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("acquired %v, %v", f.Acquired, err)
	}
	if _, err := n1.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 0, Last: 2, Type: share.Accept}, {First: 3, Last: 3, Type: share.Release}}); err != nil {
		t.Fatal(err)
	}
	persist(t, n1, tp)
	// Accepted after the last save and never saved: as if the answer
	// never reached the member. Node 1 stops leading first.
	m.lead(tp, 2, 1)
	if _, err := n1.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 4, Last: 4, Type: share.Accept}}); !errors.Is(err, errNotLeader) {
		t.Fatalf("ack on the old leader: %v, want not leader", err)
	}

	n2 := newNode(t, m, 2)
	join(t, n2, "y")
	f, err = n2.Acquire(t0, "g", "y", tp, 100, log)
	if err != nil {
		t.Fatal(err)
	}
	want := []share.AcquiredRange{{First: 3, Last: 5, DeliveryCount: 2}, {First: 6, Last: 9, DeliveryCount: 1}}
	if fmt.Sprint(f.Acquired) != fmt.Sprint(want) {
		t.Fatalf("new leader acquired %v, want %v", f.Acquired, want)
	}
	if _, err := n2.Acknowledge(t0, "g", "y", tp, []share.Ack{{First: 3, Last: 9, Type: share.Accept}}); err != nil {
		t.Fatal(err)
	}
	persist(t, n2, tp)

	// Node 1 leads again (epoch 2): what it had in memory is stale, it
	// restores node 2's state and has nothing left to deliver.
	m.lead(tp, 1, 2)
	log.hw = 12
	f, err = n1.Acquire(t0, "g", "x", tp, 100, log)
	if err != nil || !slices.Equal(offsets(f.Acquired), []int64{10, 11}) {
		t.Fatalf("node 1 leading again acquired %v, %v; want 10-11", f.Acquired, err)
	}
	// A save under an old lease is refused, and the partition restored.
	m.lead(tp, 1, 3)
	if errs := n1.Persist(context.Background(), "g", []TopicPartition{tp}); !errors.Is(errs[0], errNotLeader) {
		t.Fatalf("save under epoch 2 while leading at 3: %v", errs[0])
	}
	f, err = n1.Acquire(t0, "g", "x", tp, 100, log)
	if err != nil || fmt.Sprint(f.Acquired) != fmt.Sprint([]share.AcquiredRange{{First: 10, Last: 11, DeliveryCount: 1}}) {
		t.Fatalf("after a refused save: %v, %v; want 10-11 delivered once (their delivery was never saved)", f.Acquired, err)
	}
}

// TestSharePersistNewPartitionSaved: a share-partition made at the log's
// end is saved before anything is delivered from it, so that a new
// leader starts there too rather than at its own end.
func TestSharePersistNewPartitionSaved(t *testing.T) {
	m := newMetaStore()
	m.lead(tp, 1, 0)
	cfg := DefaultConfig() // latest
	cfg.Store = nodeStore{m, 1}
	n1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := &memLog{hw: 5, keys: []string{""}}
	join(t, n1, "x")
	if f, err := n1.Acquire(t0, "g", "x", tp, 10, log); err != nil || len(f.Acquired) != 0 {
		t.Fatalf("acquired %v, %v", f.Acquired, err)
	}
	persist(t, n1, tp)
	m.lead(tp, 2, 1)
	log.hw = 8
	cfg.Store = nodeStore{m, 2}
	n2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	join(t, n2, "x")
	if f, err := n2.Acquire(t0, "g", "x", tp, 10, log); err != nil || !slices.Equal(offsets(f.Acquired), []int64{5, 6, 7}) {
		t.Fatalf("new leader acquired %v, %v; want 5-7", f.Acquired, err)
	}
}

// TestSharePersistBatches: the saves asked for while one is under way
// go together in the next, and each caller is answered.
func TestSharePersistBatches(t *testing.T) {
	m := newMetaStore()
	m.gate, m.saving = make(chan struct{}), make(chan struct{}, 1)
	const parts = 8
	var tps []TopicPartition
	for p := range int32(parts) {
		tps = append(tps, TopicPartition{Topic: "t", Partition: p})
		m.lead(tps[p], 1, 0)
	}
	n := newNode(t, m, 1)
	join(t, n, "x")
	log := &memLog{hw: 4, keys: []string{""}}
	for _, p := range tps {
		if _, err := n.Acquire(t0, "g", "x", p, 1, log); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, parts)
	go func() { errs <- n.Persist(context.Background(), "g", tps[:1])[0] }()
	<-m.saving // the first save is under way and waits at the gate
	for _, p := range tps[1:] {
		go func() { errs <- n.Persist(context.Background(), "g", []TopicPartition{p})[0] }()
	}
	poll.True(t, "the other saves to queue behind the first", func() bool {
		n.saver.mu.Lock()
		defer n.saver.mu.Unlock()
		return len(n.saver.pending) == parts-1
	})
	m.saving = nil
	close(m.gate)
	for range parts {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if saves, states := n.SaveStats(); saves != 2 || states != parts {
		t.Fatalf("%d saves carrying %d states, want 2 carrying %d", saves, states, parts)
	}
	// Nothing changed since: nothing to save.
	persist(t, n, tps...)
	if saves, _ := n.SaveStats(); saves != 2 {
		t.Fatalf("%d saves after saving unchanged partitions, want 2", saves)
	}
}

// BenchmarkSharePersist: a member acquires 50 records at a time from each
// of 4 partitions and accepts them, with every round saved (to a store in
// memory, so what is measured is the coordinator's own cost: snapshots and
// the batching) and without. One op is one record accepted.
func BenchmarkSharePersist(b *testing.B) {
	for _, saved := range []bool{false, true} {
		b.Run(fmt.Sprintf("saved=%v", saved), func(b *testing.B) {
			m := newMetaStore()
			cfg := DefaultConfig()
			cfg.ResetEarliest = true
			if saved {
				cfg.Store = nodeStore{m, 1}
			}
			c, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			var tps []TopicPartition
			for p := range int32(4) {
				tps = append(tps, TopicPartition{Topic: "t", Partition: p})
				m.lead(tps[p], 1, 0)
			}
			if _, err := c.Heartbeat(t0, Heartbeat{Group: "g", MemberID: "x", Topics: []string{"t"}}); err != nil {
				b.Fatal(err)
			}
			log := &memLog{hw: 1 << 40, keys: []string{"a", "b", "c"}}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				for _, p := range tps {
					f, err := c.Acquire(t0, "g", "x", p, 50, log)
					if err != nil {
						b.Fatal(err)
					}
					acks := make([]share.Ack, len(f.Acquired))
					for i, r := range f.Acquired {
						acks[i] = share.Ack{First: r.First, Last: r.Last, Type: share.Accept}
						done += int(r.Last - r.First + 1)
					}
					if _, err := c.Acknowledge(t0, "g", "x", p, acks); err != nil {
						b.Fatal(err)
					}
				}
				for _, err := range c.Persist(ctx, "g", tps) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestSharePersistSplitsLargeSaves: states with more runs than one write
// carries go in several, each answered.
func TestSharePersistSplitsLargeSaves(t *testing.T) {
	m := newMetaStore()
	n := newNode(t, m, 1)
	cfg := share.DefaultConfig()
	cfg.MaxRecordLocks = 40000
	if err := n.SetGroupConfig("g", GroupConfig{Partition: cfg}); err != nil {
		t.Fatal(err)
	}
	join(t, n, "x")
	log := &memLog{hw: 40000, keys: []string{""}}
	var tps []TopicPartition
	for p := range int32(3) {
		tp := TopicPartition{Topic: "t", Partition: p}
		tps = append(tps, tp)
		m.lead(tp, 1, 0)
		if _, err := n.Acquire(t0, "g", "x", tp, 40000, log); err != nil {
			t.Fatal(err)
		}
		// Every other record accepted: 40000 runs of one record.
		var acks []share.Ack
		for o := int64(1); o < 40000; o += 2 {
			acks = append(acks, share.Ack{First: o, Last: o, Type: share.Accept})
		}
		if _, err := n.Acknowledge(t0, "g", "x", tp, acks); err != nil {
			t.Fatal(err)
		}
	}
	persist(t, n, tps...)
	if saves, states := n.SaveStats(); saves != 3 || states != 3 {
		t.Fatalf("%d saves of %d states, want each state in a save of its own", saves, states)
	}
	for _, tp := range tps {
		st, ok := m.saved[skey("g", tp)]
		if !ok || st.Records() != 40000 || len(st.Runs) != 40000 {
			t.Fatalf("%v saved %v with %d runs over %d records", tp, ok, len(st.Runs), st.Records())
		}
	}
}
