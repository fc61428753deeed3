package metadata

// Share groups' own settings and the deletion of a share group's saved
// state (metadata.version 16, MetadataVersionShareGroupConfig): one
// ShareGroupConfig per group that has ever had settings or been deleted,
// its generation the index of the entry that last changed it. A
// share-partition state is stored only under the generation its writer
// saw (checkShareState), so a leader that has not applied a change or a
// delete yet cannot store a state it replaced.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	pb "github.com/quirelog/quire/api/metapb"
)

// ErrInvalidShareGroupConfig: share group settings the FSM refuses (an
// empty key, too large).
var ErrInvalidShareGroupConfig = errors.New("metadata: invalid share group config")

// ShareGroupConfig is a share group's stored settings: Configs (keys as
// Kafka names them; none for a group deleted or never set), Generation
// the index of the entry that last set them or deleted its state,
// Deleted that of the last delete (0: never), DeletedTopics the topics
// that delete named (none: all of the group's state).
type ShareGroupConfig struct {
	Group         string
	Configs       map[string]string
	Generation    uint64
	Deleted       uint64
	DeletedTopics []string
}

// maxShareGroupConfigBytes bounds a group's settings in the log.
const maxShareGroupConfigBytes = 64 << 10

// ShareGroupConfig returns group's stored settings; false when it has
// none (no settings were ever set and it was never deleted). The map is
// the image's: not to be changed.
func (img *Image) ShareGroupConfig(group string) (ShareGroupConfig, bool) {
	c, ok := img.shareGroupConfigs[group]
	return c, ok
}

// ShareGroups are the groups with a saved share-partition state or
// settings of their own, sorted.
func (img *Image) ShareGroups() []string {
	seen := map[string]bool{}
	for k := range img.shareStates {
		seen[k.Group] = true
	}
	for g, c := range img.shareGroupConfigs {
		if len(c.Configs) > 0 {
			seen[g] = true
		}
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// ShareGroupStates is how many share-partition states group has saved.
func (img *Image) ShareGroupStates(group string) int {
	n := 0
	for k := range img.shareStates {
		if k.Group == group {
			n++
		}
	}
	return n
}

func shareGroupConfigToPB(c ShareGroupConfig) *pb.ShareGroupConfig {
	return &pb.ShareGroupConfig{Group: c.Group, Configs: c.Configs, Generation: c.Generation, Deleted: c.Deleted, DeletedTopics: c.DeletedTopics}
}

func loadShareGroupConfigs(tx *bolt.Tx, img *Image) error {
	img.shareGroupConfigs = map[string]ShareGroupConfig{}
	err := tx.Bucket(bucketShareGroupConfigs).ForEach(func(_, v []byte) error {
		var r pb.ShareGroupConfig
		if err := proto.Unmarshal(v, &r); err != nil {
			return err
		}
		img.shareGroupConfigs[r.Group] = ShareGroupConfig{Group: r.Group, Configs: r.Configs, Generation: r.Generation, Deleted: r.Deleted, DeletedTopics: r.DeletedTopics}
		return nil
	})
	if err != nil {
		return fmt.Errorf("metadata: load share group configs: %w", err)
	}
	return nil
}

func (d *draft) putShareGroupConfig(c ShareGroupConfig) {
	d.img.shareGroupConfigs = cloneMap(d.img.shareGroupConfigs)
	d.img.shareGroupConfigs[c.Group] = c
	d.put(bucketShareGroupConfigs, []byte(c.Group), shareGroupConfigToPB(c))
}

// applyPutShareGroupConfig changes a group's settings: the keys of
// Delete removed, then Configs set, on those the entry finds; no new
// generation when nothing changes. It answers the group's generation
// (uint64).
func (d *draft) applyPutShareGroupConfig(c *pb.PutShareGroupConfig, index uint64) any {
	if err := ValidateGroupID(c.Group); err != nil {
		return err
	}
	old := d.img.shareGroupConfigs[c.Group]
	merged := maps.Clone(old.Configs)
	if merged == nil {
		merged = map[string]string{}
	}
	for _, k := range c.Delete {
		delete(merged, k)
	}
	maps.Copy(merged, c.Configs)
	size := 0
	for k, v := range merged {
		if k == "" {
			return fmt.Errorf("%w: share group %q: an empty config key", ErrInvalidShareGroupConfig, c.Group)
		}
		size += len(k) + len(v)
	}
	if size > maxShareGroupConfigBytes {
		return fmt.Errorf("%w: share group %q: %d bytes of settings, at most %d", ErrInvalidShareGroupConfig, c.Group, size, maxShareGroupConfigBytes)
	}
	if maps.Equal(merged, old.Configs) {
		return old.Generation
	}
	if len(merged) == 0 {
		merged = nil
	}
	d.putShareGroupConfig(ShareGroupConfig{Group: c.Group, Configs: merged, Generation: index, Deleted: old.Deleted, DeletedTopics: old.DeletedTopics})
	return index
}

// ShareGroupDeleted answers a DeleteShareGroup: how many states went,
// and the group's generation after it (the entry's index).
type ShareGroupDeleted struct {
	States     int
	Generation uint64
}

// applyDeleteShareGroup removes a group's share-partition states and
// settings, or its states on some topics, answering ShareGroupDeleted.
// Every node drops what it holds of the group on those topics, or all
// of it (a new Deleted, with DeletedTopics).
func (d *draft) applyDeleteShareGroup(c *pb.DeleteShareGroup, index uint64) any {
	if err := ValidateGroupID(c.Group); err != nil {
		return err
	}
	n := 0
	cloned := false
	for k := range d.img.shareStates {
		if k.Group != c.Group || (len(c.Topics) > 0 && !slices.Contains(c.Topics, k.Topic)) {
			continue
		}
		if !cloned {
			d.img.shareStates = cloneMap(d.img.shareStates)
			cloned = true
		}
		delete(d.img.shareStates, k)
		d.must(d.tx.Bucket(bucketShareStates).Delete(shareStateKey(k)))
		n++
	}
	var configs map[string]string
	if len(c.Topics) > 0 {
		configs = d.img.shareGroupConfigs[c.Group].Configs
	}
	d.putShareGroupConfig(ShareGroupConfig{Group: c.Group, Configs: configs, Generation: index, Deleted: index, DeletedTopics: slices.Clone(c.Topics)})
	return ShareGroupDeleted{States: n, Generation: index}
}

// PutShareGroupConfig changes a share group's settings: the keys of
// del back to the node's, those of set set (the caller validated them),
// and answers the group's settings generation after it.
func (c *Controller) PutShareGroupConfig(ctx context.Context, group string, set map[string]string, del []string) (uint64, error) {
	return proposeAnswer[uint64](ctx, c, &pb.Command{Cmd: &pb.Command_PutShareGroupConfig{PutShareGroupConfig: &pb.PutShareGroupConfig{Group: group, Configs: set, Delete: del}}}, "put share group config")
}

// DeleteShareGroup removes a share group's saved states and settings,
// or with topics its states on them (the caller checked it has no
// members), and answers how many states went and the group's generation
// after it.
func (c *Controller) DeleteShareGroup(ctx context.Context, group string, topics []string) (ShareGroupDeleted, error) {
	return proposeAnswer[ShareGroupDeleted](ctx, c, &pb.Command{Cmd: &pb.Command_DeleteShareGroup{DeleteShareGroup: &pb.DeleteShareGroup{Group: group, Topics: topics}}}, "delete share group")
}

// applyAlterShareGroupOffsets sets the start offset of share-partitions
// of a group: each one's state becomes a new one starting there, nothing
// in flight, written under the partition's leadership in the image, and
// the group gets a new generation and a delete of the topics named, so
// that every node drops what it holds of the group on them (those
// partitions' leaders then load the new states). It refuses the whole
// entry for an unknown topic or partition or a negative offset, and
// answers the group's generation (uint64).
func (d *draft) applyAlterShareGroupOffsets(c *pb.AlterShareGroupOffsets, index uint64) any {
	if err := ValidateGroupID(c.Group); err != nil {
		return err
	}
	if len(c.Offsets) == 0 {
		return fmt.Errorf("%w: share group %q: no offsets to set", ErrInvalidShareGroupConfig, c.Group)
	}
	states := make([]ShareState, len(c.Offsets))
	var topics []string
	for i, o := range c.Offsets {
		t, ok := d.img.topics[o.Topic]
		if !ok || o.Partition < 0 || int(o.Partition) >= len(t.Partitions) {
			return fmt.Errorf("%w: %s-%d", ErrUnknownTopic, o.Topic, o.Partition)
		}
		if o.StartOffset < 0 {
			return fmt.Errorf("%w: share group %q: start offset %d of %s-%d", ErrInvalidPartition, c.Group, o.StartOffset, o.Topic, o.Partition)
		}
		states[i] = ShareState{ShareKey: ShareKey{Group: c.Group, Topic: o.Topic, Partition: o.Partition}, TopicID: t.ID,
			LeaderEpoch: t.Partitions[o.Partition].LeaderEpoch, Start: o.StartOffset, GroupGeneration: index}
		if !slices.Contains(topics, o.Topic) {
			topics = append(topics, o.Topic)
		}
	}
	d.img.shareStates = cloneMap(d.img.shareStates)
	for _, s := range states {
		d.img.shareStates[s.ShareKey] = s
		d.put(bucketShareStates, shareStateKey(s.ShareKey), ShareStateToPB(s))
	}
	slices.Sort(topics)
	d.putShareGroupConfig(ShareGroupConfig{Group: c.Group, Configs: d.img.shareGroupConfigs[c.Group].Configs, Generation: index, Deleted: index, DeletedTopics: topics})
	return index
}

// ShareStartOffset is a share-partition's new start offset
// (AlterShareGroupOffsets).
type ShareStartOffset struct {
	Topic       string
	Partition   int32
	StartOffset int64
}

// AlterShareGroupOffsets sets the start offset of share-partitions of a
// group with no members (the caller checked) and answers the group's
// settings generation after it.
func (c *Controller) AlterShareGroupOffsets(ctx context.Context, group string, offsets []ShareStartOffset) (uint64, error) {
	return proposeAnswer[uint64](ctx, c, AlterShareGroupOffsetsCommand(group, offsets), "alter share group offsets")
}

// AlterShareGroupOffsetsCommand is the command setting offsets.
func AlterShareGroupOffsetsCommand(group string, offsets []ShareStartOffset) *pb.Command {
	cmd := &pb.AlterShareGroupOffsets{Group: group}
	for _, o := range offsets {
		cmd.Offsets = append(cmd.Offsets, &pb.ShareStartOffset{Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset})
	}
	return &pb.Command{Cmd: &pb.Command_AlterShareGroupOffsets{AlterShareGroupOffsets: cmd}}
}

// ShareStatesOf returns group's saved share-partition states, sorted by
// topic and partition.
func (img *Image) ShareStatesOf(group string) []ShareState {
	var out []ShareState
	for k := range img.shareStates {
		if k.Group == group {
			s, _ := img.ShareState(k)
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b ShareState) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	return out
}
