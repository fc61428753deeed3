package broker

import (
	"context"
	"fmt"
	"sync"

	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
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

func (s shareStore) Load(group string, tp sharegroup.TopicPartition, lease sharegroup.Lease) (share.Snapshot, bool, error) {
	st, ok := s.b.cluster.image().ShareState(metadata.ShareKey{Group: group, Topic: tp.Topic, Partition: tp.Partition})
	if !ok || st.TopicID != lease.Incarnation {
		return share.Snapshot{}, false, nil
	}
	snap := share.Snapshot{Start: st.Start, Runs: make([]share.Run, len(st.Runs))}
	for i, r := range st.Runs {
		snap.Runs[i] = share.Run{Length: int(r.Length), State: share.State(r.State), DeliveryCount: int(r.DeliveryCount)}
	}
	return snap, true, nil
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
	if s.b.cluster.image().MetadataVersion() < metadata.MetadataVersionShareState {
		return make([]error, len(states)), nil
	}
	out := make([]metadata.ShareState, len(states))
	for i, st := range states {
		out[i] = metadata.ShareState{ShareKey: metadata.ShareKey{Group: st.Group, Topic: st.Topic, Partition: st.Partition},
			TopicID: st.Lease.Incarnation, LeaderEpoch: st.Lease.Epoch, Start: st.Start, Runs: make([]metadata.ShareRun, len(st.Runs))}
		for j, r := range st.Runs {
			out[i].Runs[j] = metadata.ShareRun{Length: int32(r.Length), State: int32(r.State), DeliveryCount: int32(r.DeliveryCount)}
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
