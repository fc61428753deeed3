package request_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/quirelog/quire/request"
)

// groupStore is a request.ShareGroupStore in memory: groups with saved
// state, and whether the metadata.version keeps settings and deletes.
type groupStore struct {
	mu        sync.Mutex
	supported bool
	saved     map[string]bool
	deletes   int
}

func (s *groupStore) Supported() bool { return s.supported }

func (s *groupStore) ShareGroupConfig(string) map[string]string { return nil }

func (s *groupStore) HasShareGroup(group string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saved[group]
}

func (s *groupStore) PutShareGroupConfig(context.Context, string, map[string]string, []string) error {
	return request.ErrShareConfigUnsupported
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
