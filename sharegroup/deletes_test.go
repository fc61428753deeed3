package sharegroup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/quirelog/quire/share"
)

var errStaleGeneration = errors.New("written under another settings generation")

// groupLog stands for the metadata log's share entries together: the
// states of a metaStore and the settings of a configSource, a delete
// removing the states it names and an alter replacing them, as the log's
// DeleteShareGroup and AlterShareGroupOffsets do.
type groupLog struct {
	m   *metaStore
	src *configSource
}

func (l groupLog) deleteTopics(group string, topics ...string) {
	l.m.mu.Lock()
	for k, st := range l.m.saved {
		if st.Group == group && slices.Contains(topics, st.Topic) {
			delete(l.m.saved, k)
		}
	}
	l.m.mu.Unlock()
	l.src.deleteTopics(group, topics...)
}

// alter sets the start of group's share-partition tp (led at epoch 0):
// a new state under the entry's generation.
func (l groupLog) alter(group string, tp TopicPartition, start int64) {
	l.src.deleteTopics(group, tp.Topic)
	_, gen, _, _ := l.src.ShareGroupConfig(group)
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	l.m.saved[skey(group, tp)] = SavedState{Group: group, TopicPartition: tp, Lease: Lease{Epoch: 0, Incarnation: "id-" + tp.Topic},
		Snapshot: share.Snapshot{Start: start}, Generation: gen}
}

// fencedStore is a node's store that refuses, as the metadata log does,
// a state written under a settings generation not the group's.
type fencedStore struct {
	nodeStore
	src *configSource
}

func (s fencedStore) Save(ctx context.Context, states []SavedState) ([]error, error) {
	out := make([]error, len(states))
	var keep []SavedState
	var at []int
	for i, st := range states {
		if _, gen, _, _ := s.src.ShareGroupConfig(st.Group); gen != st.Generation {
			out[i] = fmt.Errorf("%w: %d, the group's is %d", errStaleGeneration, st.Generation, gen)
			continue
		}
		keep, at = append(keep, st), append(at, i)
	}
	errs, err := s.nodeStore.Save(ctx, keep)
	if err != nil {
		return nil, err
	}
	for j, e := range errs {
		out[at[j]] = e
	}
	return out, nil
}

// newGroupLogNode is node 1 over l, leading tps at epoch 0.
func newGroupLogNode(t *testing.T, l groupLog, tps ...TopicPartition) *Coordinator {
	t.Helper()
	for _, p := range tps {
		l.m.lead(p, 1, 0)
	}
	cfg := DefaultConfig()
	cfg.ResetEarliest = true
	cfg.Store = fencedStore{nodeStore{l.m, 1}, l.src}
	cfg.Configs = l.src
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// acceptFirst has member id acquire and accept records 0 and 1 of each
// of tps, saved.
func acceptFirst(t *testing.T, n *Coordinator, id string, log Log, tps ...TopicPartition) {
	t.Helper()
	for _, p := range tps {
		if f, err := n.Acquire(t0, "g", id, p, 2, log); err != nil || !slices.Equal(offsets(f.Acquired), []int64{0, 1}) {
			t.Fatalf("%s acquired %v, %v on %v", id, f.Acquired, err, p)
		}
		if _, err := n.Acknowledge(t0, "g", id, p, []share.Ack{{First: 0, Last: 1, Type: share.Accept}}); err != nil {
			t.Fatal(err)
		}
	}
	persist(t, n, tps...)
}

// TestShareGroupTwoDeletesBetweenUses: two deletes of a group's state on
// different topics land before the node next uses the group. Its
// share-partitions on both topics go: the first delete's starts afresh
// (its records accepted before the delete delivered again, first
// deliveries) and its save does not bring back the state deleted; one
// made just before, its first save still to come, stays and is saved.
func TestShareGroupTwoDeletesBetweenUses(t *testing.T) {
	tpU, tpV := TopicPartition{Topic: "u", Partition: 0}, TopicPartition{Topic: "v", Partition: 0}
	l := groupLog{m: newMetaStore(), src: newConfigSource()}
	n := newGroupLogNode(t, l, tp, tpU, tpV)
	log := &memLog{hw: 4, keys: []string{""}}
	join(t, n, "x")
	acceptFirst(t, n, "x", log, tp, tpU)
	mark := n.MarkGroup("g")
	if f, err := n.Acquire(t0, "g", "x", tpV, 1, log); err != nil || !slices.Equal(offsets(f.Acquired), []int64{0}) {
		t.Fatalf("x acquired %v, %v on %v", f.Acquired, err, tpV)
	}

	l.deleteTopics("g", "t")
	l.deleteTopics("g", "u")

	if errs := n.PersistSince(context.Background(), "g", []TopicPartition{tpV}, mark); errs[0] != nil {
		t.Fatalf("saving the acquisition on %v, made before the deletes of other topics: %v", tpV, errs[0])
	}
	if st, ok := l.m.saved[skey("g", tpV)]; !ok || st.Start != 0 || len(st.Runs) == 0 || st.Runs[0].State != share.Acquired {
		t.Fatalf("saved on %v: %+v, %v; want x's record acquired", tpV, st, ok)
	}
	join(t, n, "y")
	for _, p := range []TopicPartition{tp, tpU} {
		f, err := n.Acquire(t0, "g", "y", p, 10, log)
		if err != nil || len(f.Acquired) != 1 || f.Acquired[0] != (share.AcquiredRange{First: 0, Last: 3, DeliveryCount: 1}) {
			t.Errorf("after its state was deleted, y acquired %+v, %v on %v; want 0-3, first deliveries", f.Acquired, err, p)
		}
	}
	persist(t, n, tp, tpU)
	for _, p := range []TopicPartition{tp, tpU} {
		if st := l.m.saved[skey("g", p)]; st.Start != 0 {
			t.Errorf("saved on %v after its state was deleted: start %d, want 0 (the state deleted brought back)", p, st.Start)
		}
	}
}

// TestShareGroupTwoAltersBetweenUses: two start offsets set on different
// topics land before the node next uses the group: its share-partitions
// on both go on from the start set.
func TestShareGroupTwoAltersBetweenUses(t *testing.T) {
	tpU := TopicPartition{Topic: "u", Partition: 0}
	l := groupLog{m: newMetaStore(), src: newConfigSource()}
	n := newGroupLogNode(t, l, tp, tpU)
	log := &memLog{hw: 10, keys: []string{""}}
	join(t, n, "x")
	acceptFirst(t, n, "x", log, tp, tpU)
	if _, err := n.Heartbeat(t0, Heartbeat{Group: "g", MemberID: "x", Epoch: -1}); err != nil {
		t.Fatal(err)
	}

	l.alter("g", tp, 6)
	l.alter("g", tpU, 6)

	join(t, n, "y")
	for _, p := range []TopicPartition{tp, tpU} {
		f, err := n.Acquire(t0, "g", "y", p, 10, log)
		if err != nil || len(f.Acquired) != 1 || f.Acquired[0] != (share.AcquiredRange{First: 6, Last: 9, DeliveryCount: 1}) {
			t.Errorf("after its start was set to 6, y acquired %+v, %v on %v; want 6-9, first deliveries", f.Acquired, err, p)
		}
	}
}

// TestShareGroupTwoDeletesDropRestored: a share-partition restored from
// its saved state and not saved since goes as well when its state is
// deleted by the first of two deletes landing between two uses.
func TestShareGroupTwoDeletesDropRestored(t *testing.T) {
	tpU := TopicPartition{Topic: "u", Partition: 0}
	l := groupLog{m: newMetaStore(), src: newConfigSource()}
	log := &memLog{hw: 2, keys: []string{""}}
	n := newGroupLogNode(t, l, tp, tpU)
	join(t, n, "x")
	acceptFirst(t, n, "x", log, tp, tpU)

	// The node restarted: its share-partitions restored, nothing to
	// deliver, nothing saved.
	n = newGroupLogNode(t, l, tp, tpU)
	join(t, n, "y")
	for _, p := range []TopicPartition{tp, tpU} {
		if f, err := n.Acquire(t0, "g", "y", p, 10, log); err != nil || len(f.Acquired) != 0 {
			t.Fatalf("y acquired %v, %v on %v; want nothing", f.Acquired, err, p)
		}
	}
	if saves, _ := n.SaveStats(); saves != 0 {
		t.Fatalf("%d saves of share-partitions restored unchanged", saves)
	}

	l.deleteTopics("g", "t")
	l.deleteTopics("g", "u")

	log.hw = 4
	for _, p := range []TopicPartition{tp, tpU} {
		f, err := n.Acquire(t0, "g", "y", p, 10, log)
		if err != nil || len(f.Acquired) != 1 || f.Acquired[0] != (share.AcquiredRange{First: 0, Last: 3, DeliveryCount: 1}) {
			t.Errorf("after its state was deleted, y acquired %+v, %v on %v; want 0-3, first deliveries", f.Acquired, err, p)
		}
	}
}
