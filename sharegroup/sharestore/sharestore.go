// Package sharestore keeps the share groups' state in the metadata log:
// the share coordinator's Store and ConfigSource (States) and the
// request core's ShareGroupStore (Groups). It reads this node's
// metadata image and writes through the controller, both reached
// through interfaces of its own (Images, Controller).
package sharestore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
)

// Images is this node's view of the metadata log.
type Images interface {
	// Image is the newest image whose changes the node reflects.
	Image() *metadata.Image
	// WaitFor blocks until cond holds for such an image, or ctx ends.
	WaitFor(ctx context.Context, cond func(*metadata.Image) bool) (*metadata.Image, error)
}

// Controller writes share state through the metadata log's controller
// (controlplane.Forwarder).
type Controller interface {
	// PutShareStates writes states led by broker, each fenced by its
	// leader epoch, answering each one's refusal.
	PutShareStates(ctx context.Context, broker int32, states []metadata.ShareState) ([]error, error)
	// PutShareGroupConfig changes a group's settings and answers their
	// generation after the change.
	PutShareGroupConfig(ctx context.Context, group string, set map[string]string, del []string) (uint64, error)
	// DeleteShareGroup removes a group's states and settings (with
	// topics, its states on them only).
	DeleteShareGroup(ctx context.Context, group string, topics []string) (metadata.ShareGroupDeleted, error)
	// AlterShareGroupOffsets sets the start offsets of a group's
	// share-partitions and answers the group's generation after it.
	AlterShareGroupOffsets(ctx context.Context, group string, set []metadata.ShareStartOffset) (uint64, error)
}

// States is the share coordinator's Store over the metadata log: a
// partition's lease is its leader epoch and topic id in this node's image,
// states are read from the image and written through the controller
// (PutShareStates, metadata.version 15), fenced there by the lease. Below
// that level nothing is saved: the state stays in memory, as before it.
type States struct {
	nodeID int32
	images Images
	ctl    Controller
	stop   <-chan struct{}

	// saves lets the node stop with no save under way: a save runs on
	// after the call that asked for it, and would otherwise reach the
	// controller through a connection already closed.
	mu     sync.Mutex
	closed bool
	saves  sync.WaitGroup
}

var (
	_ sharegroup.Store        = (*States)(nil)
	_ sharegroup.ConfigSource = (*States)(nil)
)

// NewStates returns the Store of node nodeID; stop closes when the node
// stops, cancelling the saves under way.
func NewStates(nodeID int32, images Images, ctl Controller, stop <-chan struct{}) *States {
	return &States{nodeID: nodeID, images: images, ctl: ctl, stop: stop}
}

// Lease is this node's leadership of tp in its image.
func (s *States) Lease(tp sharegroup.TopicPartition) (sharegroup.Lease, error) {
	leader, epoch, id, ok := s.images.Image().ShareLeader(tp.Topic, tp.Partition)
	if !ok {
		return sharegroup.Lease{}, fmt.Errorf("%w: %s-%d", replica.ErrUnknownTopicOrPartition, tp.Topic, tp.Partition)
	}
	if leader != s.nodeID {
		return sharegroup.Lease{}, &replica.NotLeaderError{Topic: tp.Topic, Partition: tp.Partition, Leader: leader, Epoch: epoch}
	}
	return sharegroup.Lease{Epoch: epoch, Incarnation: id}, nil
}

// Load is the state the image holds for group on tp in the lease's
// topic incarnation.
func (s *States) Load(group string, tp sharegroup.TopicPartition, lease sharegroup.Lease) (sharegroup.SavedState, bool, error) {
	st, ok := s.images.Image().ShareState(metadata.ShareKey{Group: group, Topic: tp.Topic, Partition: tp.Partition})
	if !ok || st.TopicID != lease.Incarnation {
		return sharegroup.SavedState{}, false, nil
	}
	out := sharegroup.SavedState{Group: group, TopicPartition: tp, Lease: lease, Generation: st.GroupGeneration, DeadLettered: st.DeadLettered,
		Snapshot: share.Snapshot{Start: st.Start, Runs: make([]share.Run, len(st.Runs))}}
	for i, r := range st.Runs {
		out.Runs[i] = share.Run{Length: int(r.Length), State: share.State(r.State), DeliveryCount: int(r.DeliveryCount)}
	}
	for _, d := range st.DeadLetters {
		out.DeadLetters = append(out.DeadLetters, sharegroup.PendingDeadLetter{
			DeadLetter: share.DeadLetter{Offset: d.Offset, DeliveryCount: int(d.DeliveryCount), Reason: share.Reason(d.Reason)},
			Archived:   time.UnixMilli(d.ArchivedMs)})
	}
	return out, true, nil
}

// ShareGroupConfig is the group's saved settings and their generations
// (sharegroup.ConfigSource).
func (s *States) ShareGroupConfig(group string) (map[string]string, uint64, uint64, []string) {
	c, _ := s.images.Image().ShareGroupConfig(group)
	return c.Configs, c.Generation, c.Deleted, c.DeletedTopics
}

// begin registers a save, false once the node is stopping.
func (s *States) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.saves.Add(1)
	return true
}

// Close refuses new saves and waits for those under way (the node's
// stop has cancelled them).
func (s *States) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.saves.Wait()
}

// Save writes states through the controller, each fenced by its lease.
func (s *States) Save(ctx context.Context, states []sharegroup.SavedState) ([]error, error) {
	if !s.begin() {
		return nil, fmt.Errorf("%w: the broker is stopping", metadata.ErrShutdown)
	}
	defer s.saves.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	mv := s.images.Image().MetadataVersion()
	if mv < metadata.MetadataVersionShareState {
		return make([]error, len(states)), nil
	}
	out := make([]metadata.ShareState, len(states))
	for i, st := range states {
		out[i] = metadata.ShareState{ShareKey: metadata.ShareKey{Group: st.Group, Topic: st.Topic, Partition: st.Partition},
			TopicID: st.Lease.Incarnation, LeaderEpoch: st.Lease.Epoch, Start: st.Start, Runs: make([]metadata.ShareRun, len(st.Runs))}
		for j, r := range st.Runs {
			out[i].Runs[j] = metadata.ShareRun{Length: int32(r.Length), State: int32(r.State), DeliveryCount: int32(r.DeliveryCount)}
		}
		if mv < metadata.MetadataVersionShareGroupConfig {
			// The fields of level 16 left out: a node of level 15
			// would drop them from its image (the dead letters are
			// then written as before 16, at most once).
			continue
		}
		out[i].GroupGeneration = st.Generation
		if mv >= metadata.MetadataVersionShareDeadLettered {
			out[i].DeadLettered = st.DeadLettered
		}
		for _, d := range st.DeadLetters {
			out[i].DeadLetters = append(out[i].DeadLetters, metadata.ShareDeadLetter{Offset: d.Offset, DeliveryCount: int32(d.DeliveryCount),
				Reason: int32(d.Reason), ArchivedMs: d.Archived.UnixMilli()})
		}
	}
	errs, err := s.ctl.PutShareStates(ctx, s.nodeID, out)
	if err != nil {
		return nil, err
	}
	for i, e := range errs {
		if e != nil {
			// The partition is led elsewhere, or at another epoch: the
			// client finds its leader again.
			errs[i] = fmt.Errorf("%w: %w", replica.ErrNotLeader, e)
		}
	}
	return errs, nil
}

// Groups is the request core's ShareGroupStore over the metadata log:
// settings and deletes through the controller (metadata.version 16),
// each call returning once this node's image holds its change, so that
// the node's next answer reflects it.
type Groups struct {
	images Images
	ctl    Controller
}

// NewGroups returns the ShareGroupStore over images and ctl.
func NewGroups(images Images, ctl Controller) *Groups {
	return &Groups{images: images, ctl: ctl}
}

// Supported says whether the cluster's metadata.version keeps share
// group settings.
func (s *Groups) Supported() bool {
	return s.images.Image().MetadataVersion() >= metadata.MetadataVersionShareGroupConfig
}

// ShareGroupConfig is the group's own settings; nil for none.
func (s *Groups) ShareGroupConfig(group string) map[string]string {
	c, _ := s.images.Image().ShareGroupConfig(group)
	return c.Configs
}

// HasShareGroup says whether the group has a saved state or settings.
func (s *Groups) HasShareGroup(group string) bool {
	img := s.images.Image()
	c, _ := img.ShareGroupConfig(group)
	return len(c.Configs) > 0 || img.ShareGroupStates(group) > 0
}

// HasShareState says whether the group has a saved state.
func (s *Groups) HasShareState(group string) bool {
	return s.images.Image().ShareGroupStates(group) > 0
}

// PutShareGroupConfig changes the group's settings and waits for this
// node's image to hold the change.
func (s *Groups) PutShareGroupConfig(ctx context.Context, group string, set map[string]string, del []string) error {
	gen, err := s.ctl.PutShareGroupConfig(ctx, group, set, del)
	if err != nil {
		return err
	}
	if gen == 0 {
		return nil // nothing changed on a group never set
	}
	// At the change's generation, or the one it left when it changed
	// nothing.
	return s.waitGeneration(ctx, group, gen-1)
}

// DeleteShareGroup removes the group's states and settings and waits
// for this node's image to hold the delete.
func (s *Groups) DeleteShareGroup(ctx context.Context, group string, topics []string) error {
	r, err := s.ctl.DeleteShareGroup(ctx, group, topics)
	if err != nil {
		return err
	}
	// Up to the delete's own generation: one read from this node's
	// image before the call could be older, and any change after it
	// would end the wait before this node holds the delete.
	return s.waitGeneration(ctx, group, r.Generation-1)
}

// waitGeneration waits until this node's image holds a change of the
// group's settings after generation before (at most 10 s: the change is
// made either way).
func (s *Groups) waitGeneration(ctx context.Context, group string, before uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.images.WaitFor(ctx, func(img *metadata.Image) bool {
		c, _ := img.ShareGroupConfig(group)
		return c.Generation > before
	})
	if err != nil {
		return fmt.Errorf("%w: the change is made but this node's metadata has not caught up with it yet", replica.ErrRequestTimedOut)
	}
	return nil
}

// ShareStarts is each saved share-partition's start offset, with how
// many records past it are finished (acknowledged or archived).
func (s *Groups) ShareStarts(group string) []request.ShareStartOffset {
	states := s.images.Image().ShareStatesOf(group)
	out := make([]request.ShareStartOffset, len(states))
	for i, st := range states {
		out[i] = request.ShareStartOffset{Topic: st.Topic, Partition: st.Partition, StartOffset: st.Start, LeaderEpoch: st.LeaderEpoch,
			DeadLettered: st.DeadLettered}
		for _, r := range st.Runs {
			if share.State(r.State) == share.Acknowledged || share.State(r.State) == share.Archived {
				out[i].Finished += int64(r.Length)
			}
		}
	}
	return out
}

// OffsetsSupported says whether the cluster's metadata.version lets a
// group's start offsets be set.
func (s *Groups) OffsetsSupported() bool {
	return s.images.Image().MetadataVersion() >= metadata.MetadataVersionShareOffsets
}

// AlterShareGroupOffsets sets the start offsets of the group's
// share-partitions and waits for this node's image to hold the change.
func (s *Groups) AlterShareGroupOffsets(ctx context.Context, group string, offsets []request.ShareStartOffset) error {
	set := make([]metadata.ShareStartOffset, len(offsets))
	for i, o := range offsets {
		set[i] = metadata.ShareStartOffset{Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset}
	}
	gen, err := s.ctl.AlterShareGroupOffsets(ctx, group, set)
	if err != nil {
		return err
	}
	return s.waitGeneration(ctx, group, gen-1)
}
