package request_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
)

// groupStore is a request.ShareGroupStore in memory: groups with saved
// state, their settings, and whether the metadata.version keeps settings
// and deletes.
type groupStore struct {
	mu        sync.Mutex
	supported bool
	saved     map[string]bool
	configs   map[string]map[string]string
	deletes   int
	puts      int
	// offsets: the metadata.version sets start offsets; starts are the
	// saved start offsets by group.
	offsets bool
	starts  map[string][]request.ShareStartOffset
}

func (s *groupStore) ShareStarts(group string) []request.ShareStartOffset {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.starts[group])
}

func (s *groupStore) OffsetsSupported() bool { return s.offsets }

func (s *groupStore) AlterShareGroupOffsets(_ context.Context, group string, offsets []request.ShareStartOffset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.starts == nil {
		s.starts = map[string][]request.ShareStartOffset{}
	}
	for _, o := range offsets {
		s.starts[group] = slices.DeleteFunc(s.starts[group], func(x request.ShareStartOffset) bool {
			return x.Topic == o.Topic && x.Partition == o.Partition
		})
		s.starts[group] = append(s.starts[group], o)
	}
	if s.saved == nil {
		s.saved = map[string]bool{}
	}
	s.saved[group] = true
	return nil
}

func (s *groupStore) Supported() bool { return s.supported }

func (s *groupStore) ShareGroupConfig(group string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.configs[group]
}

func (s *groupStore) HasShareGroup(group string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saved[group] || len(s.configs[group]) > 0
}

func (s *groupStore) HasShareState(group string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saved[group]
}

func (s *groupStore) PutShareGroupConfig(_ context.Context, group string, set map[string]string, del []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.supported {
		return request.ErrShareConfigUnsupported
	}
	if s.configs == nil {
		s.configs = map[string]map[string]string{}
	}
	kv := maps.Clone(s.configs[group])
	if kv == nil {
		kv = map[string]string{}
	}
	for _, k := range del {
		delete(kv, k)
	}
	maps.Copy(kv, set)
	s.configs[group] = kv
	s.puts++
	return nil
}

func (s *groupStore) DeleteShareGroup(_ context.Context, group string, _ []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.supported {
		return request.ErrShareConfigUnsupported
	}
	delete(s.saved, group)
	s.deletes++
	return nil
}

// TestCoreDeleteShareGroupBelowVersion16: deleting a share group whose
// state is saved at a metadata.version that cannot delete it is refused,
// not answered done with the state kept (the group would go on from it);
// at 16 the state goes.
func TestCoreDeleteShareGroupBelowVersion16(t *testing.T) {
	t.Parallel()
	store := &groupStore{saved: map[string]bool{"g": true}}
	coord := &coordinator{offsets: map[string][]request.CommittedOffset{}, members: map[string]int{}}
	f, _ := newShareCore(t, false, func(c *request.Config) { c.ShareStore, c.Groups = store, coord })
	ctx := ctxT(t)
	if err := f.core.DeleteGroup(ctx, "g"); !errors.Is(err, request.ErrShareConfigUnsupported) {
		t.Fatalf("delete below 16: %v, want %v", err, request.ErrShareConfigUnsupported)
	}
	if !store.HasShareGroup("g") {
		t.Fatal("the saved state went")
	}
	store.supported = true
	if err := f.core.DeleteGroup(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if store.HasShareGroup("g") || store.deletes != 1 || len(coord.deleted) != 0 {
		t.Fatalf("after the delete: saved %v, %d deletes, consumer groups deleted %v", store.saved, store.deletes, coord.deleted)
	}
}

// TestCoreShareKeyOrderingFromStreams: from metadata.version 16 a
// key-ordered stream turns share.key.ordering on (saved on the group)
// only for a group with neither share-partition state nor a key
// ordering setting; a group with state, even one with other settings of
// its own, or one set to false, is refused (INVALID_REQUEST, naming
// AlterConfigs) with nothing written. A key-ordered fetch never writes
// the setting: a leader serving the group without it refuses the fetch,
// retriably while the group could still take it on.
func TestCoreShareKeyOrderingFromStreams(t *testing.T) {
	t.Parallel()
	store := &groupStore{supported: true, saved: map[string]bool{"used": true},
		configs: map[string]map[string]string{
			"used": {"errors.deadletterqueue.topic.name": "dlq"},
			"off":  {"share.key.ordering": "false"},
		}}
	f, _ := newShareCore(t, false, func(c *request.Config) { c.ShareStore = store })
	ctx := ctxT(t)
	for _, g := range []string{"used", "off"} {
		err := f.core.ShareGroupRequireKeyOrdering(ctx, g)
		if !errors.Is(err, replica.ErrInvalidRequest) || !strings.Contains(err.Error(), "AlterConfigs") {
			t.Errorf("key ordering asked of group %q: %v, want invalid request naming AlterConfigs", g, err)
		}
	}
	if store.puts != 0 || store.configs["used"]["share.key.ordering"] != "" {
		t.Fatalf("refused, yet written: %d puts, %v", store.puts, store.configs)
	}
	if err := f.core.ShareGroupRequireKeyOrdering(ctx, "new"); err != nil {
		t.Fatal(err)
	}
	if store.configs["new"]["share.key.ordering"] != "true" {
		t.Fatalf("a new group's settings after a key-ordered start: %v", store.configs["new"])
	}

	// A key-ordered fetch of a group without the setting writes nothing.
	if _, err := f.core.ShareGroupHeartbeat(ctx, &request.ShareHeartbeat{Group: "fresh", MemberID: "m", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	puts := store.puts
	_, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "fresh", MemberID: "m", KeyOrdered: true, Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}})
	if !errors.Is(err, replica.ErrRequestTimedOut) || store.puts != puts {
		t.Fatalf("key-ordered fetch of a group whose setting this node does not hold yet: %v, %d puts; want retriable, none", err, store.puts-puts)
	}
	store.mu.Lock()
	store.configs["fresh"] = map[string]string{"share.key.ordering": "false"}
	store.mu.Unlock()
	if _, err := f.core.ShareFetch(ctx, &request.ShareFetchRequest{Group: "fresh", MemberID: "m", KeyOrdered: true, Partitions: []request.SharePartition{{Topic: "t", Partition: 0}}}); !errors.Is(err, replica.ErrInvalidRequest) {
		t.Fatalf("key-ordered fetch of a group set to false: %v, want invalid request", err)
	}
}

// TestCoreDeleteShareGroupMembersElsewhere: a share group whose member
// heartbeats to another node is not empty: deleting it, or its state on
// a topic, is refused (NON_EMPTY_GROUP), its saved state kept; with a
// node not answering, retriably; once no node has a member, it goes.
func TestCoreDeleteShareGroupMembersElsewhere(t *testing.T) {
	t.Parallel()
	store := &groupStore{supported: true, saved: map[string]bool{"g": true}}
	nodes := &shareNodes{members: map[string]bool{"g/x": true}}
	coord := &coordinator{offsets: map[string][]request.CommittedOffset{}, members: map[string]int{}}
	f, _ := newShareCore(t, false, func(c *request.Config) { c.ShareStore, c.ShareCluster, c.Groups = store, nodes, coord })
	ctx := ctxT(t)
	if err := f.core.DeleteGroup(ctx, "g"); !errors.Is(err, group.ErrNonEmptyGroup) {
		t.Fatalf("delete with a member on another node: %v, want %v", err, group.ErrNonEmptyGroup)
	}
	if _, err := f.core.DeleteShareGroupOffsets(ctx, "g", []string{"t"}); !errors.Is(err, group.ErrNonEmptyGroup) {
		t.Fatalf("delete offsets with a member on another node: %v, want %v", err, group.ErrNonEmptyGroup)
	}
	if store.deletes != 0 || !store.HasShareState("g") {
		t.Fatalf("the state of a group with a member went: %d deletes", store.deletes)
	}
	nodes.mu.Lock()
	nodes.members, nodes.down = nil, true
	nodes.mu.Unlock()
	if err := f.core.DeleteGroup(ctx, "g"); !errors.Is(err, request.ErrShareMemberUnconfirmed) {
		t.Fatalf("delete with a node not answering: %v, want %v", err, request.ErrShareMemberUnconfirmed)
	}
	nodes.mu.Lock()
	nodes.down = false
	nodes.mu.Unlock()
	if err := f.core.DeleteGroup(ctx, "g"); err != nil || store.deletes != 1 {
		t.Fatalf("delete of an empty group: %v, %d deletes", err, store.deletes)
	}
}
