package metadata

// Share-partitions' state in the metadata log (from metadata.version 15,
// MetadataVersionShareState): one SharePartitionState per share group and
// topic partition, written whole by the partition's leader (the share
// coordinator, package sharegroup, in memory there) when acknowledgements
// or acquisitions change it, many in one PutShareStates entry. A new
// leader, or the same node after a restart, restores it from its image.
//
// Each state is fenced by the leadership it was decided under: it is
// stored only if its writer leads the partition at the leader epoch it
// names, in the topic incarnation it names. A new leader's image holds
// every state an older leader stored, since the change that made it
// leader came after them in the log, and nothing an older leader writes
// after that change is stored.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	pb "github.com/quirelog/quire/api/metapb"
)

// ErrShareStateFenced: a share-partition state written by a node that no
// longer leads the partition at the epoch it names (or of a topic
// incarnation gone).
var ErrShareStateFenced = errors.New("metadata: share-partition state from a stale leader")

// ShareKey names one share-partition: a share group on a topic partition.
type ShareKey struct {
	Group     string
	Topic     string
	Partition int32
}

// ShareState is one share-partition's saved state and the leadership it
// was written under: every record below Start is finished; from there
// on, Runs (package share's Snapshot, whose types this package does not
// import).
type ShareState struct {
	ShareKey
	TopicID     string
	LeaderEpoch int32
	Start       int64
	Runs        []ShareRun
	// DeadLetters are the records archived as dead letters not yet known
	// to be written to the group's dead-letter topic.
	DeadLetters []ShareDeadLetter
	// GroupGeneration is the group's ShareGroupConfig generation the
	// writer saw (0: none): the state is refused under another.
	GroupGeneration uint64
	// DeadLettered counts the records archived as dead letters since
	// the state was made (for describe).
	DeadLettered int64
}

// ShareDeadLetter is a record archived as a dead letter: its offset,
// delivery count, reason (share.Reason's numbers) and when it was
// archived (ms since the epoch).
type ShareDeadLetter struct {
	Offset        int64
	DeliveryCount int32
	Reason        int32
	ArchivedMs    int64
}

// ShareRun is Length consecutive records in one State (share.State's
// numbers: 0 available, 1 acquired, 2 acknowledged, 3 archived), each
// delivered DeliveryCount times.
type ShareRun struct {
	Length        int32
	State         int32
	DeliveryCount int32
}

// maxShareRunState is the highest ShareRun.State (archived).
const maxShareRunState = 3

func (s ShareState) validate() error {
	if s.Start < 0 {
		return fmt.Errorf("%w: share state of %s-%d starts at %d", ErrInvalidPartition, s.Topic, s.Partition, s.Start)
	}
	for i, r := range s.Runs {
		if r.Length < 1 || r.State < 0 || r.State > maxShareRunState || r.DeliveryCount < 0 {
			return fmt.Errorf("%w: share state of %s-%d: run %d of %d records in state %d delivered %d times",
				ErrInvalidPartition, s.Topic, s.Partition, i, r.Length, r.State, r.DeliveryCount)
		}
	}
	return nil
}

// ShareStateResults answers a PutShareStates: each state's refusal, nil
// for one stored, in the command's order.
type ShareStateResults []error

// ShareState returns a share-partition's saved state.
func (img *Image) ShareState(k ShareKey) (ShareState, bool) {
	s, ok := img.shareStates[k]
	if !ok {
		return ShareState{}, false
	}
	s.Runs = append([]ShareRun(nil), s.Runs...)
	s.DeadLetters = append([]ShareDeadLetter(nil), s.DeadLetters...)
	return s, true
}

// ShareLeader is the leader and leader epoch of topic-partition and the
// topic's id, without copying the topic: what a share-partition's lease
// is checked against at every fetch.
func (img *Image) ShareLeader(topic string, partition int32) (leader, epoch int32, topicID string, ok bool) {
	t, ok := img.topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return -1, -1, "", false
	}
	p := &t.Partitions[partition]
	return p.Leader, p.LeaderEpoch, t.ID, true
}

// ShareStateCount is how many share-partitions have a saved state.
func (img *Image) ShareStateCount() int { return len(img.shareStates) }

// ShareStateToPB is a state's stored form.
func ShareStateToPB(s ShareState) *pb.SharePartitionState {
	r := &pb.SharePartitionState{Group: s.Group, Topic: s.Topic, TopicId: s.TopicID, Partition: s.Partition,
		LeaderEpoch: s.LeaderEpoch, StartOffset: s.Start, Runs: make([]*pb.ShareRecordRun, len(s.Runs))}
	for i, run := range s.Runs {
		r.Runs[i] = &pb.ShareRecordRun{Length: run.Length, State: run.State, DeliveryCount: run.DeliveryCount}
	}
	for _, d := range s.DeadLetters {
		r.DeadLetters = append(r.DeadLetters, &pb.ShareDeadLetter{Offset: d.Offset, DeliveryCount: d.DeliveryCount, Reason: d.Reason, ArchivedMs: d.ArchivedMs})
	}
	r.GroupGeneration = s.GroupGeneration
	r.DeadLettered = s.DeadLettered
	return r
}

// ShareStateFromPB is ShareStateToPB's inverse.
func ShareStateFromPB(r *pb.SharePartitionState) ShareState {
	s := ShareState{ShareKey: ShareKey{Group: r.Group, Topic: r.Topic, Partition: r.Partition}, TopicID: r.TopicId,
		LeaderEpoch: r.LeaderEpoch, Start: r.StartOffset}
	for _, run := range r.Runs {
		s.Runs = append(s.Runs, ShareRun{Length: run.Length, State: run.State, DeliveryCount: run.DeliveryCount})
	}
	for _, d := range r.DeadLetters {
		s.DeadLetters = append(s.DeadLetters, ShareDeadLetter{Offset: d.Offset, DeliveryCount: d.DeliveryCount, Reason: d.Reason, ArchivedMs: d.ArchivedMs})
	}
	s.GroupGeneration = r.GroupGeneration
	s.DeadLettered = r.DeadLettered
	return s
}

func shareStateKey(k ShareKey) []byte {
	b := append([]byte(k.Group), 0)
	b = append(b, k.Topic...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

func loadShareStates(tx *bolt.Tx, img *Image) error {
	img.shareStates = map[ShareKey]ShareState{}
	err := tx.Bucket(bucketShareStates).ForEach(func(_, v []byte) error {
		var r pb.SharePartitionState
		if err := proto.Unmarshal(v, &r); err != nil {
			return err
		}
		s := ShareStateFromPB(&r)
		img.shareStates[s.ShareKey] = s
		return nil
	})
	if err != nil {
		return fmt.Errorf("metadata: load share states: %w", err)
	}
	return nil
}

// checkShareState says why s cannot be stored from broker.
func (img *Image) checkShareState(broker int32, s ShareState) error {
	if err := ValidateGroupID(s.Group); err != nil {
		return err
	}
	if err := s.validate(); err != nil {
		return err
	}
	t, ok := img.topics[s.Topic]
	if !ok || t.ID != s.TopicID {
		return fmt.Errorf("%w: %s-%d: topic %q (id %s) is gone", ErrShareStateFenced, s.Topic, s.Partition, s.Topic, s.TopicID)
	}
	if s.Partition < 0 || int(s.Partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: %s-%d", ErrUnknownTopic, s.Topic, s.Partition)
	}
	if p := t.Partitions[s.Partition]; p.Leader != broker || p.LeaderEpoch != s.LeaderEpoch {
		return fmt.Errorf("%w: %s-%d: broker %d at leader epoch %d, the partition is led by %d at epoch %d",
			ErrShareStateFenced, s.Topic, s.Partition, broker, s.LeaderEpoch, p.Leader, p.LeaderEpoch)
	}
	if gen := img.shareGroupConfigs[s.Group].Generation; gen != s.GroupGeneration {
		return fmt.Errorf("%w: share group %q on %s-%d: written under settings generation %d, the group's is %d (its settings changed or its state was deleted)",
			ErrShareStateFenced, s.Group, s.Topic, s.Partition, s.GroupGeneration, gen)
	}
	return nil
}

// applyPutShareStates stores each state its writer may still write and
// refuses the others, answering ShareStateResults.
func (d *draft) applyPutShareStates(c *pb.PutShareStates, _ uint64) any {
	out := make(ShareStateResults, len(c.States))
	cloned := false
	for i, r := range c.States {
		s := ShareStateFromPB(r)
		if out[i] = d.img.checkShareState(c.BrokerId, s); out[i] != nil {
			continue
		}
		if !cloned {
			d.img.shareStates = cloneMap(d.img.shareStates)
			cloned = true
		}
		d.img.shareStates[s.ShareKey] = s
		d.put(bucketShareStates, shareStateKey(s.ShareKey), r)
	}
	return out
}

// deleteTopicShareStates removes the share states of a topic deleted.
func (d *draft) deleteTopicShareStates(topic string) {
	cloned := false
	for k := range d.img.shareStates {
		if k.Topic != topic {
			continue
		}
		if !cloned {
			d.img.shareStates = cloneMap(d.img.shareStates)
			cloned = true
		}
		delete(d.img.shareStates, k)
		d.must(d.tx.Bucket(bucketShareStates).Delete(shareStateKey(k)))
	}
}

// PutShareStates stores share-partitions' states written by broker, the
// leader of their partitions, in one entry, and answers each one's
// refusal (nil: stored).
func (c *Controller) PutShareStates(ctx context.Context, broker int32, states []ShareState) (ShareStateResults, error) {
	cmd := &pb.PutShareStates{BrokerId: broker, States: make([]*pb.SharePartitionState, len(states))}
	for i, s := range states {
		cmd.States[i] = ShareStateToPB(s)
	}
	resp, err := c.propose(ctx, &pb.Command{Cmd: &pb.Command_PutShareStates{PutShareStates: cmd}})
	if err != nil {
		return nil, err
	}
	out, ok := resp.(ShareStateResults)
	if !ok || len(out) != len(states) {
		return nil, fmt.Errorf("metadata: %d share states answered %v", len(states), resp)
	}
	return out, nil
}
