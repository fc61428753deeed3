package broker

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

// shareStore is the share coordinator's Store over the metadata log: a
// partition's lease is its leader epoch and topic id in this node's image,
// states are read from the image and written through the controller
// (PutShareStates, metadata.version 15), fenced there by the lease. Below
// that level nothing is saved: the state stays in memory, as before it.
type shareStore struct{ b *Broker }

func (s shareStore) Lease(tp sharegroup.TopicPartition) (sharegroup.Lease, error) {
	leader, epoch, id, ok := s.b.cluster.image().ShareLeader(tp.Topic, tp.Partition)
	if !ok {
		return sharegroup.Lease{}, fmt.Errorf("%w: %s-%d", replica.ErrUnknownTopicOrPartition, tp.Topic, tp.Partition)
	}
	if leader != s.b.cfg.NodeID {
		return sharegroup.Lease{}, &replica.NotLeaderError{Topic: tp.Topic, Partition: tp.Partition, Leader: leader, Epoch: epoch}
	}
	return sharegroup.Lease{Epoch: epoch, Incarnation: id}, nil
}

func (s shareStore) Load(group string, tp sharegroup.TopicPartition, lease sharegroup.Lease) (sharegroup.SavedState, bool, error) {
	st, ok := s.b.cluster.image().ShareState(metadata.ShareKey{Group: group, Topic: tp.Topic, Partition: tp.Partition})
	if !ok || st.TopicID != lease.Incarnation {
		return sharegroup.SavedState{}, false, nil
	}
	out := sharegroup.SavedState{Group: group, TopicPartition: tp, Lease: lease, Generation: st.GroupGeneration,
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
func (s shareStore) ShareGroupConfig(group string) (map[string]string, uint64, uint64, []string) {
	c, _ := s.b.cluster.image().ShareGroupConfig(group)
	return c.Configs, c.Generation, c.Deleted, c.DeletedTopics
}

// shareSaves lets the broker stop with no save under way: a save runs
// on after the call that asked for it, and would otherwise reach the
// controller through a forwarder already closed.
type shareSaves struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// begin registers a save, false once the broker is stopping.
func (s *shareSaves) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// close refuses new saves and waits for those under way (the broker's
// stop has cancelled them).
func (s *shareSaves) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
}

func (s shareStore) Save(ctx context.Context, states []sharegroup.SavedState) ([]error, error) {
	if !s.b.shareSaves.begin() {
		return nil, fmt.Errorf("%w: the broker is stopping", metadata.ErrShutdown)
	}
	defer s.b.shareSaves.wg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	mv := s.b.cluster.image().MetadataVersion()
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
		for _, d := range st.DeadLetters {
			out[i].DeadLetters = append(out[i].DeadLetters, metadata.ShareDeadLetter{Offset: d.Offset, DeliveryCount: int32(d.DeliveryCount),
				Reason: int32(d.Reason), ArchivedMs: d.Archived.UnixMilli()})
		}
	}
	errs, err := s.b.cluster.fwd.PutShareStates(ctx, s.b.cfg.NodeID, out)
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

// shareGroupStore is the request core's ShareGroupStore over the
// metadata log: settings and deletes through the controller
// (metadata.version 16), each call returning once this node's image
// holds its change, so that the node's next answer reflects it.
type shareGroupStore struct{ b *Broker }

func (s shareGroupStore) Supported() bool {
	return s.b.cluster.image().MetadataVersion() >= metadata.MetadataVersionShareGroupConfig
}

func (s shareGroupStore) ShareGroupConfig(group string) map[string]string {
	c, _ := s.b.cluster.image().ShareGroupConfig(group)
	return c.Configs
}

func (s shareGroupStore) HasShareGroup(group string) bool {
	img := s.b.cluster.image()
	c, _ := img.ShareGroupConfig(group)
	return len(c.Configs) > 0 || img.ShareGroupStates(group) > 0
}

func (s shareGroupStore) HasShareState(group string) bool {
	return s.b.cluster.image().ShareGroupStates(group) > 0
}

func (s shareGroupStore) PutShareGroupConfig(ctx context.Context, group string, set map[string]string, del []string) error {
	gen, err := s.b.cluster.fwd.PutShareGroupConfig(ctx, group, set, del)
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

func (s shareGroupStore) DeleteShareGroup(ctx context.Context, group string, topics []string) error {
	r, err := s.b.cluster.fwd.DeleteShareGroup(ctx, group, topics)
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
func (s shareGroupStore) waitGeneration(ctx context.Context, group string, before uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.b.cluster.waitFor(ctx, func(img *metadata.Image) bool {
		c, _ := img.ShareGroupConfig(group)
		return c.Generation > before
	})
	if err != nil {
		return fmt.Errorf("%w: the change is made but this node's metadata has not caught up with it yet", replica.ErrRequestTimedOut)
	}
	return nil
}

func (s shareGroupStore) ShareStarts(group string) []request.ShareStartOffset {
	states := s.b.cluster.image().ShareStatesOf(group)
	out := make([]request.ShareStartOffset, len(states))
	for i, st := range states {
		out[i] = request.ShareStartOffset{Topic: st.Topic, Partition: st.Partition, StartOffset: st.Start, LeaderEpoch: st.LeaderEpoch}
		for _, r := range st.Runs {
			if share.State(r.State) == share.Acknowledged || share.State(r.State) == share.Archived {
				out[i].Finished += int64(r.Length)
			}
		}
	}
	return out
}

func (s shareGroupStore) OffsetsSupported() bool {
	return s.b.cluster.image().MetadataVersion() >= metadata.MetadataVersionShareOffsets
}

func (s shareGroupStore) AlterShareGroupOffsets(ctx context.Context, group string, offsets []request.ShareStartOffset) error {
	set := make([]metadata.ShareStartOffset, len(offsets))
	for i, o := range offsets {
		set[i] = metadata.ShareStartOffset{Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset}
	}
	gen, err := s.b.cluster.fwd.AlterShareGroupOffsets(ctx, group, set)
	if err != nil {
		return err
	}
	return s.waitGeneration(ctx, group, gen-1)
}
