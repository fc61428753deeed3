package sharestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	metapb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
	"github.com/quirelog/quire/sharegroup/sharestore"
)

// metaLog is a metadata log with no raft: each command applied at once
// to an FSM, as the controller would have it applied. It is both the
// node's Images and its Controller.
type metaLog struct {
	t       *testing.T
	f       *metadata.FSM
	mu      sync.Mutex
	index   uint64
	changed chan struct{}
	puts    int // PutShareStates calls
	// hold, when set, keeps PutShareStates until its context ends,
	// telling entered first.
	hold     bool
	entered  chan struct{}
	returned bool // a held PutShareStates has returned
}

// newMetaLog has brokers 1-3 and topic t, partition 0 led by 1 and
// partition 1 by 2, at metadata.version level.
func newMetaLog(t *testing.T, level int32) *metaLog {
	t.Helper()
	f, err := metadata.OpenFSM(filepath.Join(t.TempDir(), "metadata.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	m := &metaLog{t: t, f: f, changed: make(chan struct{}), entered: make(chan struct{}, 1)}
	v := metadata.SupportedMetadataVersions()
	for id := int32(1); id <= 3; id++ {
		epoch := m.ok(&metapb.Command{Cmd: &metapb.Command_RegisterBroker{RegisterBroker: &metapb.RegisterBroker{
			BrokerId: id, Incarnation: "inc", AdvertisedAddr: "127.0.0.1:1", MinMetadataVersion: v.Min, MaxMetadataVersion: v.Max}}}).(int64)
		m.ok(&metapb.Command{Cmd: &metapb.Command_UnfenceBroker{UnfenceBroker: &metapb.UnfenceBroker{BrokerId: id, BrokerEpoch: epoch}}})
	}
	m.ok(&metapb.Command{Cmd: &metapb.Command_CreateTopic{CreateTopic: &metapb.CreateTopic{Name: "t", TopicId: "id-t", Partitions: []*metapb.PartitionAssignment{
		{Partition: 0, Replicas: []int32{1, 2}, Leader: 1, Isr: []int32{1, 2}},
		{Partition: 1, Replicas: []int32{2, 1}, Leader: 2, Isr: []int32{2, 1}}}}}})
	m.ok(&metapb.Command{Cmd: &metapb.Command_FeatureLevel{FeatureLevel: &metapb.FeatureLevel{Name: metadata.MetadataVersionFeature, Level: level}}})
	return m
}

func (m *metaLog) apply(cmd *metapb.Command) any {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.index++
	r := m.f.ApplyCommand(cmd, m.index)
	close(m.changed)
	m.changed = make(chan struct{})
	return r
}

func (m *metaLog) ok(cmd *metapb.Command) any {
	m.t.Helper()
	r := m.apply(cmd)
	if err, ok := r.(error); ok {
		m.t.Fatalf("%v: %v", cmd, err)
	}
	return r
}

func (m *metaLog) Image() *metadata.Image { return m.f.Image() }

func (m *metaLog) WaitFor(ctx context.Context, cond func(*metadata.Image) bool) (*metadata.Image, error) {
	for {
		m.mu.Lock()
		ch := m.changed
		m.mu.Unlock()
		if img := m.f.Image(); cond(img) {
			return img, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (m *metaLog) PutShareStates(ctx context.Context, broker int32, states []metadata.ShareState) ([]error, error) {
	m.mu.Lock()
	m.puts++
	hold := m.hold
	m.mu.Unlock()
	if hold {
		m.entered <- struct{}{}
		<-ctx.Done()
		m.mu.Lock()
		m.returned = true
		m.mu.Unlock()
		return nil, ctx.Err()
	}
	cmd := &metapb.PutShareStates{BrokerId: broker}
	for _, s := range states {
		cmd.States = append(cmd.States, metadata.ShareStateToPB(s))
	}
	r := m.apply(&metapb.Command{Cmd: &metapb.Command_PutShareStates{PutShareStates: cmd}})
	if err, ok := r.(error); ok {
		return nil, err
	}
	return r.(metadata.ShareStateResults), nil
}

func (m *metaLog) PutShareGroupConfig(_ context.Context, group string, set map[string]string, del []string) (uint64, error) {
	r := m.apply(&metapb.Command{Cmd: &metapb.Command_PutShareGroupConfig{PutShareGroupConfig: &metapb.PutShareGroupConfig{Group: group, Configs: set, Delete: del}}})
	if err, ok := r.(error); ok {
		return 0, err
	}
	return r.(uint64), nil
}

func (m *metaLog) DeleteShareGroup(_ context.Context, group string, topics []string) (metadata.ShareGroupDeleted, error) {
	r := m.apply(&metapb.Command{Cmd: &metapb.Command_DeleteShareGroup{DeleteShareGroup: &metapb.DeleteShareGroup{Group: group, Topics: topics}}})
	if err, ok := r.(error); ok {
		return metadata.ShareGroupDeleted{}, err
	}
	return r.(metadata.ShareGroupDeleted), nil
}

func (m *metaLog) AlterShareGroupOffsets(_ context.Context, group string, set []metadata.ShareStartOffset) (uint64, error) {
	r := m.apply(metadata.AlterShareGroupOffsetsCommand(group, set))
	if err, ok := r.(error); ok {
		return 0, err
	}
	return r.(uint64), nil
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A partition's lease is its leadership in the image; a state saved under
// it loads back whole, and one saved under a lease that no longer holds
// is refused as not leader.
func TestShareStoreSaveLoad(t *testing.T) {
	m := newMetaLog(t, metadata.MetadataVersionShareDeadLettered)
	s := sharestore.NewStates(1, m, m, make(chan struct{}))
	t.Cleanup(s.Close)
	tp := sharegroup.TopicPartition{Topic: "t", Partition: 0}
	lease, err := s.Lease(tp)
	if err != nil || lease != (sharegroup.Lease{Epoch: 0, Incarnation: "id-t"}) {
		t.Fatalf("Lease(t-0) = %+v, %v; want epoch 0 of id-t", lease, err)
	}
	var nl *replica.NotLeaderError
	if _, err := s.Lease(sharegroup.TopicPartition{Topic: "t", Partition: 1}); !errors.As(err, &nl) || nl.Leader != 2 {
		t.Fatalf("Lease(t-1) = %v; want not leader, led by 2", err)
	}
	if _, err := s.Lease(sharegroup.TopicPartition{Topic: "u", Partition: 0}); !errors.Is(err, replica.ErrUnknownTopicOrPartition) {
		t.Fatalf("Lease(u-0) = %v; want unknown topic", err)
	}

	st := sharegroup.SavedState{Group: "g", TopicPartition: tp, Lease: lease, Generation: 0, DeadLettered: 4,
		Snapshot:    share.Snapshot{Start: 10, Runs: []share.Run{{Length: 2, State: share.State(2)}, {Length: 1, State: share.State(1), DeliveryCount: 3}}},
		DeadLetters: []sharegroup.PendingDeadLetter{{DeadLetter: share.DeadLetter{Offset: 9, DeliveryCount: 5, Reason: share.Reason(1)}, Archived: time.UnixMilli(1234)}}}
	errs, err := s.Save(testContext(t), []sharegroup.SavedState{st})
	if err != nil || len(errs) != 1 || errs[0] != nil {
		t.Fatalf("Save = %v, %v; want it stored", errs, err)
	}
	got, ok, err := s.Load("g", tp, lease)
	if err != nil || !ok || !reflect.DeepEqual(got, st) {
		t.Fatalf("Load = %+v, %v, %v; want %+v", got, ok, err, st)
	}
	if starts := sharestore.NewGroups(m, m).ShareStarts("g"); len(starts) != 1 || starts[0].DeadLettered != 4 || starts[0].StartOffset != 10 {
		t.Fatalf("ShareStarts = %+v; want t-0 from 10 with 4 dead-lettered", starts)
	}
	if _, ok, _ := s.Load("g", tp, sharegroup.Lease{Incarnation: "id-old"}); ok {
		t.Fatal("a state loaded for another topic incarnation")
	}

	stale := st
	stale.Lease.Epoch = 7
	errs, err = s.Save(testContext(t), []sharegroup.SavedState{stale})
	if err != nil || len(errs) != 1 || !errors.Is(errs[0], replica.ErrNotLeader) || !errors.Is(errs[0], metadata.ErrShareStateFenced) {
		t.Fatalf("Save at another epoch = %v, %v; want refused not leader", errs, err)
	}
}

// Below metadata.version 19 a state is saved without its dead-letter
// count, which a node of 18 would drop from its image.
func TestShareStoreSaveDeadLetteredBelowLevel(t *testing.T) {
	m := newMetaLog(t, metadata.MetadataVersionShareDeadLettered-1)
	s := sharestore.NewStates(1, m, m, make(chan struct{}))
	t.Cleanup(s.Close)
	tp := sharegroup.TopicPartition{Topic: "t", Partition: 0}
	lease, err := s.Lease(tp)
	if err != nil {
		t.Fatal(err)
	}
	st := sharegroup.SavedState{Group: "g", TopicPartition: tp, Lease: lease, DeadLettered: 4, Snapshot: share.Snapshot{Start: 3}}
	if errs, err := s.Save(testContext(t), []sharegroup.SavedState{st}); err != nil || errs[0] != nil {
		t.Fatalf("Save = %v, %v", errs, err)
	}
	got, ok, err := s.Load("g", tp, lease)
	if err != nil || !ok || got.Start != 3 || got.DeadLettered != 0 {
		t.Fatalf("Load = %+v, %v, %v; want the state from 3 without its count", got, ok, err)
	}
}

// Below metadata.version 15 nothing is saved, and nothing refused: the
// state stays in memory.
func TestShareStoreSaveBelowLevel(t *testing.T) {
	m := newMetaLog(t, metadata.MetadataVersionShareState-1)
	s := sharestore.NewStates(1, m, m, make(chan struct{}))
	t.Cleanup(s.Close)
	tp := sharegroup.TopicPartition{Topic: "t", Partition: 0}
	lease, err := s.Lease(tp)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := s.Save(testContext(t), []sharegroup.SavedState{{Group: "g", TopicPartition: tp, Lease: lease}})
	if err != nil || len(errs) != 1 || errs[0] != nil || m.puts != 0 {
		t.Fatalf("Save = %v, %v after %d writes; want no refusal and no write", errs, err, m.puts)
	}
}

// The node's stop cancels a save under way, Close waits for it, and a
// save after Close is refused.
func TestShareStoreCloseEndsSaves(t *testing.T) {
	m := newMetaLog(t, metadata.MetadataVersionShareGroupConfig)
	m.hold = true
	stop := make(chan struct{})
	s := sharestore.NewStates(1, m, m, stop)
	tp := sharegroup.TopicPartition{Topic: "t", Partition: 0}
	saved := make(chan error, 1)
	go func() {
		_, err := s.Save(context.Background(), []sharegroup.SavedState{{Group: "g", TopicPartition: tp}})
		saved <- err
	}()
	select {
	case <-m.entered:
	case <-time.After(time.Minute):
		t.Fatal("the save never reached the controller")
	}
	close(stop)
	s.Close()
	m.mu.Lock()
	returned := m.returned
	m.mu.Unlock()
	if !returned {
		t.Fatal("Close returned before the save under way")
	}
	if err := <-saved; !errors.Is(err, context.Canceled) {
		t.Fatalf("the save under way answered %v; want cancelled", err)
	}
	if _, err := s.Save(context.Background(), nil); !errors.Is(err, metadata.ErrShutdown) {
		t.Fatalf("a save after Close answered %v; want ErrShutdown", err)
	}
}

// A group's settings and its delete go through the controller, each call
// returning with this node's image holding it.
func TestShareStoreGroups(t *testing.T) {
	m := newMetaLog(t, metadata.MetadataVersionShareGroupConfig)
	g := sharestore.NewGroups(m, m)
	ctx := testContext(t)
	if !g.Supported() || g.HasShareGroup("g") {
		t.Fatalf("Supported %v, HasShareGroup %v; want true, false", g.Supported(), g.HasShareGroup("g"))
	}
	if err := g.PutShareGroupConfig(ctx, "g", map[string]string{"share.record.lock.duration.ms": "15000"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := g.ShareGroupConfig("g"); got["share.record.lock.duration.ms"] != "15000" || !g.HasShareGroup("g") || g.HasShareState("g") {
		t.Fatalf("settings %v, HasShareGroup %v, HasShareState %v; want the setting, a group, no state", got, g.HasShareGroup("g"), g.HasShareState("g"))
	}
	if err := g.DeleteShareGroup(ctx, "g", nil); err != nil {
		t.Fatal(err)
	}
	if g.HasShareGroup("g") || g.ShareGroupConfig("g") != nil {
		t.Fatalf("after the delete: HasShareGroup %v, settings %v", g.HasShareGroup("g"), g.ShareGroupConfig("g"))
	}

	below := sharestore.NewGroups(newMetaLog(t, metadata.MetadataVersionShareState), m)
	if below.Supported() {
		t.Fatal("share group settings supported at metadata.version 15")
	}
}

// A group's start offsets are set through the controller at
// metadata.version 17 and read back from this node's image; below it
// they cannot be set.
func TestShareStoreGroupOffsets(t *testing.T) {
	m := newMetaLog(t, metadata.MetadataVersionShareOffsets)
	g := sharestore.NewGroups(m, m)
	ctx := testContext(t)
	if !g.OffsetsSupported() || len(g.ShareStarts("g")) != 0 {
		t.Fatalf("OffsetsSupported %v, starts %v; want true, none", g.OffsetsSupported(), g.ShareStarts("g"))
	}
	if err := g.AlterShareGroupOffsets(ctx, "g", []request.ShareStartOffset{{Topic: "t", Partition: 1, StartOffset: 7}}); err != nil {
		t.Fatal(err)
	}
	got := g.ShareStarts("g")
	if len(got) != 1 || got[0].Topic != "t" || got[0].Partition != 1 || got[0].StartOffset != 7 || got[0].Finished != 0 {
		t.Fatalf("starts after the alter: %+v; want t-1 at 7, nothing finished", got)
	}
	if err := g.AlterShareGroupOffsets(ctx, "g", []request.ShareStartOffset{{Topic: "nope", Partition: 0, StartOffset: 1}}); !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("alter of an unknown topic answered %v; want ErrUnknownTopic", err)
	}
	if below := sharestore.NewGroups(newMetaLog(t, metadata.MetadataVersionShareGroupConfig), m); below.OffsetsSupported() {
		t.Fatal("share group offsets supported at metadata.version 16")
	}
}
