package sharegroup

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quirelog/quire/share"
)

// configSource is a ConfigSource in memory: each set or delete a new
// generation, as the metadata log's index.
type configSource struct {
	mu           sync.Mutex
	kv           map[string]map[string]string
	gen, deleted map[string]uint64
	topics       map[string][]string
	index        uint64
}

func newConfigSource() *configSource {
	return &configSource{kv: map[string]map[string]string{}, gen: map[string]uint64{}, deleted: map[string]uint64{}, topics: map[string][]string{}}
}

func (s *configSource) ShareGroupConfig(group string) (map[string]string, uint64, uint64, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kv[group], s.gen[group], s.deleted[group], s.topics[group]
}

func (s *configSource) set(group string, kv map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index++
	s.kv[group], s.gen[group] = kv, s.index
}

func (s *configSource) delete(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index++
	s.kv[group], s.gen[group], s.deleted[group], s.topics[group] = nil, s.index, s.index, nil
}

// deleteTopics deletes the group's state on topics, its settings kept.
func (s *configSource) deleteTopics(group string, topics ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index++
	s.gen[group], s.deleted[group], s.topics[group] = s.index, s.index, topics
}

// TestShareGroupSettingsApply: a group's saved settings decide its
// share-partitions: share.auto.offset.reset places a new one; turning
// share.key.ordering on and off applies to an existing one at once (its
// records in flight released, counts kept); the saved state names the
// settings' generation; a delete of the group's state drops what the
// node holds.
func TestShareGroupSettingsApply(t *testing.T) {
	m := newMetaStore()
	m.lead(tp, 1, 0)
	src := newConfigSource()
	cfg := DefaultConfig()
	cfg.ResetEarliest = true
	cfg.Store = nodeStore{m, 1}
	cfg.Configs = src
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := &memLog{start: 2, hw: 10, keys: []string{"a", "a", "b"}}

	// latest on the group wins over the node's earliest.
	src.set("g", map[string]string{KeyAutoOffsetReset: "latest", KeyKeyOrdering: "true", KeyDeliveryCountLimit: "3"})
	join(t, n, "x")
	join(t, n, "y")
	if f, err := n.Acquire(t0, "g", "x", tp, 10, log); err != nil || len(f.Acquired) != 0 {
		t.Fatalf("a new share-partition at latest acquired %v, %v", f.Acquired, err)
	}
	persist(t, n, tp)
	if st := m.saved[skey("g", tp)]; st.Start != 10 || st.Generation != src.gen["g"] {
		t.Fatalf("saved at %d under generation %d, want 10 under %d", st.Start, st.Generation, src.gen["g"])
	}
	if c := n.GroupConfig("g"); !c.Partition.KeyOrdering || c.Partition.DeliveryCountLimit != 3 || !c.Reset.Latest {
		t.Fatalf("group config %+v", c)
	}

	// Key ordering on: y cannot take a's next record while x holds one.
	log.hw = 13 // 10 a, 11 b, 12 a
	f, err := n.Acquire(t0, "g", "x", tp, 1, log)
	if err != nil || !slices.Equal(offsets(f.Acquired), []int64{10}) {
		t.Fatalf("x acquired %v, %v", f.Acquired, err)
	}
	if f, err = n.Acquire(t0, "g", "y", tp, 10, log); err != nil || !slices.Equal(offsets(f.Acquired), []int64{11}) {
		t.Fatalf("y acquired %v, %v; want only b's 11 while x holds a's 10", f.Acquired, err)
	}
	// Key ordering off: the share-partition is rebuilt under it, what x
	// and y held released; y now takes a's records too.
	src.set("g", map[string]string{KeyAutoOffsetReset: "latest", KeyKeyOrdering: "false"})
	if f, err = n.Acquire(t0, "g", "y", tp, 10, log); err != nil || !slices.Equal(offsets(f.Acquired), []int64{10, 11, 12}) {
		t.Fatalf("y acquired %v, %v after key ordering went off", f.Acquired, err)
	}
	counts := map[int64]int{}
	for _, r := range f.Acquired {
		for o := r.First; o <= r.Last; o++ {
			counts[o] = r.DeliveryCount
		}
	}
	if counts[10] != 2 || counts[11] != 2 || counts[12] != 1 {
		t.Fatalf("delivery counts %v, want 10 and 11 redelivered (2), 12 first (1)", counts)
	}
	if _, err := n.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 10, Last: 10, Type: share.Accept}}); !errors.Is(err, share.ErrInvalidRecordState) {
		t.Fatalf("x's ack of a record released by the change: %v", err)
	}
	persist(t, n, tp)
	if st := m.saved[skey("g", tp)]; st.Generation != src.gen["g"] {
		t.Fatalf("saved under generation %d, want %d", st.Generation, src.gen["g"])
	}

	// The group's state deleted (no members left): the node forgets it,
	// and a new share-partition starts afresh (earliest now).
	for _, id := range []string{"x", "y"} {
		if _, err := n.Heartbeat(t0, Heartbeat{Group: "g", MemberID: id, Epoch: -1}); err != nil {
			t.Fatal(err)
		}
	}
	delete(m.saved, skey("g", tp))
	src.delete("g")
	if _, parts := n.Describe("g"); len(parts) != 0 {
		t.Fatalf("share-partitions after the delete: %v", parts)
	}
	join(t, n, "z")
	if f, err = n.Acquire(t0.Add(time.Second), "g", "z", tp, 100, log); err != nil || len(f.Acquired) == 0 || f.Acquired[0].First != 2 || f.Acquired[0].DeliveryCount != 1 {
		t.Fatalf("after the delete z acquired %v, %v; want from the log start, first deliveries", f.Acquired, err)
	}
}

// TestShareGroupConfigValues: values Kafka's tools send are taken, bad
// ones and unknown keys refused with the key named.
func TestShareGroupConfigValues(t *testing.T) {
	base := GroupConfig{Partition: share.DefaultConfig(), Reset: Reset{Latest: true}}
	good := map[string]string{KeyAutoOffsetReset: "by_duration:P1DT2H30M", KeyRecordLockDuration: "15000", KeyDeliveryCountLimit: "10",
		KeyKeyOrdering: "TRUE", KeyDeadLetterTopic: "dlq.orders", KeyMaxInFlightPerKey: " 2 "}
	c, err := ApplyGroupConfigs(base, good)
	if err != nil {
		t.Fatal(err)
	}
	if c.Reset.ByDuration != 26*time.Hour+30*time.Minute || c.Partition.RecordLockDuration != 15*time.Second ||
		c.Partition.DeliveryCountLimit != 10 || !c.Partition.KeyOrdering || c.DeadLetterTopic != "dlq.orders" || c.Partition.MaxInFlightPerKey != 2 {
		t.Fatalf("%+v", c)
	}
	if v := GroupConfigValue(c, KeyAutoOffsetReset); v != "by_duration:P1DT9000S" {
		t.Fatalf("reset described as %q", v)
	}
	if v := GroupConfigValue(c, KeyMaxInFlightPerKey); v != "2" {
		t.Fatalf("max in flight per key described as %q", v)
	}
	if c, err := ApplyGroupConfigs(base, map[string]string{KeyMaxRecordLocks: "500"}); err != nil || c.Partition.MaxRecordLocks != 500 ||
		GroupConfigValue(c, KeyMaxRecordLocks) != "500" {
		t.Fatalf("%s=500: %+v, %v", KeyMaxRecordLocks, c.Partition, err)
	}
	for _, v := range []string{"99", "100001", "0", "lots"} {
		if _, err := ApplyGroupConfigs(base, map[string]string{KeyMaxRecordLocks: v}); !errors.Is(err, share.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), KeyMaxRecordLocks) {
			t.Errorf("%s=%s: %v, want an invalid config naming the key", KeyMaxRecordLocks, v, err)
		}
	}
	for _, v := range []string{"0", "-1", "two", "1.5", "1048577"} {
		if _, err := ApplyGroupConfigs(base, map[string]string{KeyMaxInFlightPerKey: v}); !errors.Is(err, share.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), KeyMaxInFlightPerKey) {
			t.Errorf("%s=%s: %v, want an invalid config naming the key", KeyMaxInFlightPerKey, v, err)
		}
	}
	for k, v := range map[string]string{KeyAutoOffsetReset: "by_duration:1h", KeyRecordLockDuration: "10", KeyDeliveryCountLimit: "0",
		KeyKeyOrdering: "maybe", "group.share.session.timeout.ms": "1000"} {
		if _, err := ApplyGroupConfigs(base, map[string]string{k: v}); !errors.Is(err, share.ErrInvalidConfig) {
			t.Errorf("%s=%s: %v", k, v, err)
		} else if !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v does not name the key", k, v, err)
		}
	}
	for _, v := range []string{"by_duration:PT0S", "by_duration:P", "by_duration:PT1H2D"} {
		if _, err := ParseReset(v); err == nil {
			t.Errorf("%s taken", v)
		}
	}
}

// TestShareGroupDeleteTopicsAndLostAcks: a delete of the group's state
// on some topics drops what the node holds of the group on those only;
// an acknowledgement applied before a delete and saved after it is
// ErrStateNotSaved (its share-partition gone or made anew), not reported
// saved.
func TestShareGroupDeleteTopicsAndLostAcks(t *testing.T) {
	m := newMetaStore()
	tpU := TopicPartition{Topic: "u", Partition: 0}
	m.lead(tp, 1, 0)
	m.lead(tpU, 1, 0)
	src := newConfigSource()
	cfg := DefaultConfig()
	cfg.ResetEarliest = true
	cfg.Store = nodeStore{m, 1}
	cfg.Configs = src
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src.set("g", map[string]string{KeyDeliveryCountLimit: "3"})
	join(t, n, "x")
	for _, p := range []TopicPartition{tp, tpU} {
		if f, err := n.Acquire(t0, "g", "x", p, 1, &memLog{hw: 4, keys: []string{""}}); err != nil || len(f.Acquired) != 1 {
			t.Fatalf("acquired %v, %v on %v", f.Acquired, err, p)
		}
	}
	persist(t, n, tp, tpU)

	// Deleted on u only: t's share-partition, with x's record, stays.
	src.deleteTopics("g", "u")
	_, parts := n.Describe("g")
	if len(parts) != 1 || parts[0].TopicPartition != tp || parts[0].Records[0].Member != "x" {
		t.Fatalf("share-partitions after deleting u's state: %+v", parts)
	}

	// An ack applied, then the group's state deleted before its save.
	mark := n.MarkGroup("g")
	if _, err := n.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 0, Last: 0, Type: share.Accept}}); err != nil {
		t.Fatal(err)
	}
	src.delete("g")
	if errs := n.PersistSince(context.Background(), "g", []TopicPartition{tp}, mark); !errors.Is(errs[0], ErrStateNotSaved) {
		t.Fatalf("saving an ack whose share-partition was dropped: %v, want %v", errs[0], ErrStateNotSaved)
	}
	// Made anew by a fetch after the delete: still not the ack's.
	if _, err := n.Acquire(t0, "g", "x", tp, 1, &memLog{hw: 4, keys: []string{""}}); err != nil {
		t.Fatal(err)
	}
	if errs := n.PersistSince(context.Background(), "g", []TopicPartition{tp}, mark); !errors.Is(errs[0], ErrStateNotSaved) {
		t.Fatalf("saving an ack whose share-partition was made anew: %v, want %v", errs[0], ErrStateNotSaved)
	}
	// A call that began after the delete saves as usual.
	if errs := n.PersistSince(context.Background(), "g", []TopicPartition{tp}, n.MarkGroup("g")); errs[0] != nil {
		t.Fatal(errs[0])
	}
}

// TestShareGroupAlteredStart: a start offset set in the saved state
// (AlterShareGroupOffsets: a new state, a delete of the topic's) is
// where the node's share-partition goes on from, what it held dropped:
// records below it are never delivered again, those from it on come as
// first deliveries. A start past the log's end waits for the log to get
// there rather than failing the fetch.
func TestShareGroupAlteredStart(t *testing.T) {
	m := newMetaStore()
	m.lead(tp, 1, 0)
	src := newConfigSource()
	cfg := DefaultConfig()
	cfg.ResetEarliest = true
	cfg.Store = nodeStore{m, 1}
	cfg.Configs = src
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := &memLog{hw: 10, keys: []string{""}}
	join(t, n, "x")
	f, err := n.Acquire(t0, "g", "x", tp, 4, log)
	if err != nil || !slices.Equal(offsets(f.Acquired), []int64{0, 1, 2, 3}) {
		t.Fatalf("x acquired %v, %v", f.Acquired, err)
	}
	if _, err := n.Acknowledge(t0, "g", "x", tp, []share.Ack{{First: 0, Last: 1, Type: share.Release}}); err != nil {
		t.Fatal(err)
	}
	persist(t, n, tp)
	if _, err := n.Heartbeat(t0, Heartbeat{Group: "g", MemberID: "x", Epoch: -1}); err != nil {
		t.Fatal(err)
	}

	// The group's start set to 6, as the metadata log's entry does.
	alter := func(start int64) {
		m.mu.Lock()
		m.saved[skey("g", tp)] = SavedState{Group: "g", TopicPartition: tp, Lease: Lease{Epoch: 0, Incarnation: "id-t"},
			Snapshot: share.Snapshot{Start: start}}
		m.mu.Unlock()
		src.deleteTopics("g", "t")
	}
	alter(6)
	join(t, n, "y")
	f, err = n.Acquire(t0, "g", "y", tp, 10, log)
	if err != nil || len(f.Acquired) != 1 || f.Acquired[0] != (share.AcquiredRange{First: 6, Last: 9, DeliveryCount: 1}) {
		t.Fatalf("after the start was set to 6, y acquired %+v, %v; want 6-9, first deliveries", f.Acquired, err)
	}
	if _, err := n.Acknowledge(t0, "g", "y", tp, []share.Ack{{First: 6, Last: 9, Type: share.Accept}}); err != nil {
		t.Fatal(err)
	}
	persist(t, n, tp)
	if st := m.saved[skey("g", tp)]; st.Start != 10 {
		t.Fatalf("saved start %d, want 10", st.Start)
	}
	if _, err := n.Heartbeat(t0, Heartbeat{Group: "g", MemberID: "y", Epoch: -1}); err != nil {
		t.Fatal(err)
	}

	// Past the log's end: nothing until the log reaches it.
	alter(15)
	join(t, n, "z")
	if f, err = n.Acquire(t0, "g", "z", tp, 10, log); err != nil || len(f.Acquired) != 0 {
		t.Fatalf("with the start past the log's end z acquired %v, %v", f.Acquired, err)
	}
	log.hw = 17
	if f, err = n.Acquire(t0, "g", "z", tp, 10, log); err != nil || !slices.Equal(offsets(f.Acquired), []int64{15, 16}) {
		t.Fatalf("once the log reached 17, z acquired %v, %v; want 15-16", f.Acquired, err)
	}
}

// TestShareGroupMaxInFlightPerKeyApplies: a group's max.in.flight.per.key
// bounds what one member holds of a key on its share-partitions (the
// node's is no bound), and a change of it applies at once.
func TestShareGroupMaxInFlightPerKeyApplies(t *testing.T) {
	src := newConfigSource()
	cfg := DefaultConfig()
	cfg.ResetEarliest = true
	cfg.Configs = src
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := &memLog{hw: 6, keys: []string{"a"}}
	src.set("g", map[string]string{KeyKeyOrdering: "true", KeyMaxInFlightPerKey: "2"})
	join(t, n, "x")
	if f, err := n.Acquire(t0, "g", "x", tp, 10, log); err != nil || !slices.Equal(offsets(f.Acquired), []int64{0, 1}) {
		t.Fatalf("x acquired %v, %v; want 0-1, two of key a", f.Acquired, err)
	}
	if v := GroupConfigValue(n.GroupConfig("g"), KeyMaxInFlightPerKey); v != "2" {
		t.Fatalf("the group's max.in.flight.per.key is %q, want 2", v)
	}
	// Raised to 4: the share-partition is rebuilt under it (what x held
	// released), and x now takes four.
	src.set("g", map[string]string{KeyKeyOrdering: "true", KeyMaxInFlightPerKey: "4"})
	if f, err := n.Acquire(t0, "g", "x", tp, 10, log); err != nil || !slices.Equal(offsets(f.Acquired), []int64{0, 1, 2, 3}) {
		t.Fatalf("after the change x acquired %v, %v; want 0-3", f.Acquired, err)
	}
}

// TestShareGroupMaxRecordLocksApplies: a group's
// share.partition.max.record.locks bounds the window of its
// share-partitions (the node's is far larger here), and a change of it
// applies at once.
func TestShareGroupMaxRecordLocksApplies(t *testing.T) {
	src := newConfigSource()
	cfg := DefaultConfig()
	cfg.ResetEarliest = true
	cfg.Configs = src
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := &memLog{hw: 1000, keys: []string{"a", "b", "c"}}
	src.set("g", map[string]string{KeyMaxRecordLocks: "100"})
	join(t, n, "x")
	f, err := n.Acquire(t0, "g", "x", tp, 500, log)
	if got := offsets(f.Acquired); err != nil || len(got) != 100 || got[99] != 99 {
		t.Fatalf("x acquired %d records, %v; want 0-99, the group's window", len(got), err)
	}
	if f, err := n.Acquire(t0, "g", "x", tp, 500, log); err != nil || len(f.Acquired) != 0 {
		t.Fatalf("with the window full x acquired %v more, %v", f.Acquired, err)
	}
	// Raised to 250: the share-partition is rebuilt under it (what x held
	// released), and x now takes 250.
	src.set("g", map[string]string{KeyMaxRecordLocks: "250"})
	if v := GroupConfigValue(n.GroupConfig("g"), KeyMaxRecordLocks); v != "250" {
		t.Fatalf("the group's max record locks is %q, want 250", v)
	}
	f, err = n.Acquire(t0, "g", "x", tp, 500, log)
	if got := offsets(f.Acquired); err != nil || len(got) != 250 || got[249] != 249 {
		t.Fatalf("after the change x acquired %d records, %v; want 0-249", len(got), err)
	}
}
