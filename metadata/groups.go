package metadata

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
)

// Consumer group offsets. A group here is what Kafka calls a simple
// consumer group: any client may commit offsets for a group id and read
// them back; membership and generations come later. The image keeps them
// as group -> topic -> partition -> CommittedOffset, so that a group's
// offsets of one topic are dropped together; deleting a topic still visits
// every group (deleteTopicOffsets), which is cheap next to a scan of the
// offsets themselves. Offsets are kept until DeleteGroup or the topic's
// deletion: there is no expiry yet.

// Limits on what a commit may carry.
const (
	// MaxGroupIDLen is the longest group id, in bytes.
	MaxGroupIDLen = 255
	// MaxOffsetMetadataLen is the most metadata kept with one offset, in
	// bytes (Kafka's offset.metadata.max.bytes default).
	MaxOffsetMetadataLen = 4096
	// MaxOffsetCommitEntries is the most partitions one commit may name,
	// so that a single raft entry (and the image copy it makes) stays
	// small.
	MaxOffsetCommitEntries = 10000
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// OffsetCommit is one partition's offset to commit for a group: the next
// offset the group reads (the last consumed plus one).
type OffsetCommit struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32 // of the last record consumed; -1 unknown
	Metadata    string
}

// CommittedOffset is a group's committed offset of one partition. Offset
// and CommitTimeMs are -1 for a partition the group never committed (as
// FetchOffsets answers it).
type CommittedOffset struct {
	Topic        string
	Partition    int32
	Offset       int64
	LeaderEpoch  int32
	Metadata     string
	CommitTimeMs int64
}

// ValidateGroupID checks a group id: 1 to MaxGroupIDLen bytes, no NUL
// byte (it separates the parts of the store's keys).
func ValidateGroupID(group string) error {
	switch {
	case group == "":
		return fmt.Errorf("%w: the group id is empty", ErrInvalidGroupID)
	case len(group) > MaxGroupIDLen:
		return fmt.Errorf("%w: the group id is %d bytes, the limit is %d", ErrInvalidGroupID, len(group), MaxGroupIDLen)
	case strings.IndexByte(group, 0) >= 0:
		return fmt.Errorf("%w: the group id %q holds a NUL byte", ErrInvalidGroupID, group)
	}
	return nil
}

// ValidateOffsetCommit checks a commit against img, the way applying it
// does: a valid group id, 1 to MaxOffsetCommitEntries entries, and each
// entry an existing topic and partition, named once, with an offset >= 0,
// a leader epoch >= -1 (-1 unknown) and metadata of at most
// MaxOffsetMetadataLen bytes. The error names the first bad entry (by its
// index) and why.
func ValidateOffsetCommit(img *Image, group string, offsets []OffsetCommit) error {
	if err := ValidateGroupID(group); err != nil {
		return err
	}
	if len(offsets) == 0 {
		return fmt.Errorf("%w: group %q: no offsets to commit", ErrInvalidOffsetCommit, group)
	}
	if len(offsets) > MaxOffsetCommitEntries {
		return fmt.Errorf("%w: group %q: %d offsets in one commit, the limit is %d",
			ErrInvalidOffsetCommit, group, len(offsets), MaxOffsetCommitEntries)
	}
	seen := make(map[TopicPartition]int, len(offsets))
	for i, o := range offsets {
		t, ok := img.topics[o.Topic]
		if !ok {
			return fmt.Errorf("%w: group %q entry %d: topic %q does not exist", ErrUnknownTopic, group, i, o.Topic)
		}
		if o.Partition < 0 || int(o.Partition) >= len(t.Partitions) {
			return fmt.Errorf("%w: group %q entry %d: topic %q has no partition %d (it has %d)",
				ErrInvalidPartition, group, i, o.Topic, o.Partition, len(t.Partitions))
		}
		if o.Offset < 0 {
			return fmt.Errorf("%w: group %q entry %d (%s-%d): negative offset %d",
				ErrInvalidOffsetCommit, group, i, o.Topic, o.Partition, o.Offset)
		}
		if o.LeaderEpoch < -1 {
			return fmt.Errorf("%w: group %q entry %d (%s-%d): leader epoch %d (-1 is unknown)",
				ErrInvalidOffsetCommit, group, i, o.Topic, o.Partition, o.LeaderEpoch)
		}
		if len(o.Metadata) > MaxOffsetMetadataLen {
			return fmt.Errorf("%w: group %q entry %d (%s-%d): metadata is %d bytes, the limit is %d",
				ErrInvalidOffsetCommit, group, i, o.Topic, o.Partition, len(o.Metadata), MaxOffsetMetadataLen)
		}
		tp := TopicPartition{o.Topic, o.Partition}
		if j, dup := seen[tp]; dup {
			return fmt.Errorf("%w: group %q entry %d (%s-%d): the partition is also entry %d",
				ErrInvalidOffsetCommit, group, i, o.Topic, o.Partition, j)
		}
		seen[tp] = i
	}
	return nil
}

// Groups returns the ids of the groups with committed offsets, sorted.
func (img *Image) Groups() []string {
	out := make([]string, 0, len(img.groups))
	for g := range img.groups {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// ListedGroups returns the ids of the groups a listing shows, sorted:
// those with committed offsets and those with membership state (members,
// or an empty group's epoch before the coordinator removes it), as
// Kafka's ListGroups shows a group from its first join.
func (img *Image) ListedGroups() []string {
	out := img.Groups()
	for id := range img.groupStates {
		if _, ok := img.groups[id]; !ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Offsets returns a group's committed offsets sorted by topic and
// partition; none for an unknown group.
func (img *Image) Offsets(group string) []CommittedOffset {
	var out []CommittedOffset
	for _, parts := range img.groups[group] {
		for _, o := range parts {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b CommittedOffset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// Offset returns a group's committed offset of one partition.
func (img *Image) Offset(group, topic string, partition int32) (CommittedOffset, bool) {
	o, ok := img.groups[group][topic][partition]
	return o, ok
}

// groupOffsets answers a fetch of a group's offsets from img: those of the
// named partitions (offset -1 where never committed; an unknown topic is
// ErrUnknownTopic, a partition it does not have ErrInvalidPartition), or
// every committed one when none is named.
func groupOffsets(img *Image, group string, partitions []TopicPartition) ([]CommittedOffset, error) {
	if err := ValidateGroupID(group); err != nil {
		return nil, err
	}
	if len(partitions) == 0 {
		return img.Offsets(group), nil
	}
	out := make([]CommittedOffset, 0, len(partitions))
	for _, tp := range partitions {
		t, ok := img.topics[tp.Topic]
		if !ok {
			return nil, fmt.Errorf("%w: topic %q does not exist", ErrUnknownTopic, tp.Topic)
		}
		if tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			return nil, fmt.Errorf("%w: topic %q has no partition %d (it has %d)", ErrInvalidPartition, tp.Topic, tp.Partition, len(t.Partitions))
		}
		o, ok := img.Offset(group, tp.Topic, tp.Partition)
		if !ok {
			o = CommittedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: -1, LeaderEpoch: -1, CommitTimeMs: -1}
		}
		out = append(out, o)
	}
	return out, nil
}

// applyCommitOffsets stores a group's offsets, all or none. A commit
// naming a member (metadata.version 8) is fenced again here, against the
// membership the log holds when it applies (fenceCommit).
func (d *draft) applyCommitOffsets(c *pb.CommitOffsets, _ uint64) any {
	offsets := make([]OffsetCommit, len(c.Offsets))
	for i, o := range c.Offsets {
		offsets[i] = OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	if err := ValidateOffsetCommit(d.img, c.Group, offsets); err != nil {
		return err
	}
	if err := fenceCommit(d.img, c); err != nil {
		return err
	}
	for _, o := range offsets {
		d.putOffset(c.Group, CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimeMs: c.CommitTimeMs})
	}
	return nil
}

// fenceCommit refuses a member's commit unless the member is in the
// group at the epoch the commit carries, in img: the coordinator checked
// it against its Machine before proposing the commit, but the member may
// have been fenced, or moved to a new epoch, by a GroupRecords entry
// applied since (its partitions perhaps committed by their new owner
// already), which Kafka's OffsetCommit refuses as STALE_MEMBER_EPOCH or
// UNKNOWN_MEMBER_ID. A commit naming no member is not checked here (the
// coordinator refuses one to a group with members): a command written
// before metadata.version 8 names none, so a log written before this check
// applies the same way on replay.
func fenceCommit(img *Image, c *pb.CommitOffsets) error {
	if c.MemberId == "" {
		return nil
	}
	st := img.groupStates[c.Group]
	if st == nil {
		return fmt.Errorf("%w: member %q is not in group %q (it has no members) when its commit applies", group.ErrUnknownMemberID, c.MemberId, c.Group)
	}
	if _, ok := st.members[c.MemberId]; !ok {
		return fmt.Errorf("%w: member %q is no longer in group %q when its commit applies", group.ErrUnknownMemberID, c.MemberId, c.Group)
	}
	if epoch := st.assignments[c.MemberId].Epoch; epoch != c.MemberEpoch {
		return fmt.Errorf("%w: member %q of group %q committed at epoch %d, its epoch is %d when the commit applies",
			group.ErrStaleMemberEpoch, c.MemberId, c.Group, c.MemberEpoch, epoch)
	}
	return nil
}

// CommitBatchResult is a CommitOffsetsBatch's answer: per commit, in
// order, nil or why it was refused.
type CommitBatchResult []error

// applyCommitOffsetsBatch applies each commit as applyCommitOffsets does,
// on its own: one refused leaves the others applied.
func (d *draft) applyCommitOffsetsBatch(c *pb.CommitOffsetsBatch, index uint64) any {
	out := make(CommitBatchResult, len(c.Commits))
	for i, cm := range c.Commits {
		if err, ok := d.applyCommitOffsets(cm, index).(error); ok {
			out[i] = err
		}
	}
	return out
}

// applyDeleteGroup removes every offset of a group; with
// committed_before_ms, only if none was committed after it.
func (d *draft) applyDeleteGroup(c *pb.DeleteGroup, _ uint64) any {
	if err := ValidateGroupID(c.Group); err != nil {
		return err
	}
	g, ok := d.img.groups[c.Group]
	if !ok {
		return fmt.Errorf("%w: %q has no committed offsets", ErrUnknownGroup, c.Group)
	}
	if before := c.CommittedBeforeMs; before != 0 {
		for topic, parts := range g {
			for p, o := range parts {
				if o.CommitTimeMs > before {
					return fmt.Errorf("%w: group %q: %s-%d committed at %d, after %d", ErrCommittedSince, c.Group, topic, p, o.CommitTimeMs, before)
				}
			}
		}
	}
	for topic := range g {
		d.deleteGroupTopic(c.Group, topic)
	}
	return nil
}

func offsetKey(group, topic string, p int32) []byte {
	k := make([]byte, 0, len(group)+len(topic)+6)
	k = append(append(k, group...), 0)
	return append(k, partitionKey(topic, p)...)
}

func offsetRecord(group string, o CommittedOffset) *pb.OffsetRecord {
	return &pb.OffsetRecord{Group: group, Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
		LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimeMs: o.CommitTimeMs}
}

func offsetFromRecord(r *pb.OffsetRecord) CommittedOffset {
	return CommittedOffset{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		LeaderEpoch: r.LeaderEpoch, Metadata: r.Metadata, CommitTimeMs: r.CommitTimeMs}
}

// groupTopic names one topic's offsets within a group.
type groupTopic struct{ group, topic string }

// ownGroup returns a group's map of topics that the draft may change in
// place, creating the group as needed: only the maps on the way to a
// change are cloned, never the other groups.
func (d *draft) ownGroup(group string) map[string]map[int32]CommittedOffset {
	if !d.groupsCloned {
		d.img.groups = cloneMap(d.img.groups)
		d.groupsCloned = true
	}
	if d.ownGroups == nil {
		d.ownGroups, d.ownGroupTopics = map[string]bool{}, map[groupTopic]bool{}
	}
	g := d.img.groups[group]
	if !d.ownGroups[group] {
		g = cloneMap(g)
		d.img.groups[group] = g
		d.ownGroups[group] = true
	}
	return g
}

// groupTopicOffsets returns a group's offsets of one topic that the draft
// may change in place.
func (d *draft) groupTopicOffsets(group, topic string) map[int32]CommittedOffset {
	g := d.ownGroup(group)
	key := groupTopic{group, topic}
	if !d.ownGroupTopics[key] {
		g[topic] = cloneMap(g[topic])
		d.ownGroupTopics[key] = true
	}
	return g[topic]
}

func (d *draft) putOffset(group string, o CommittedOffset) {
	d.groupTopicOffsets(group, o.Topic)[o.Partition] = o
	d.put(bucketOffsets, offsetKey(group, o.Topic, o.Partition), offsetRecord(group, o))
}

// deleteGroupTopic removes a group's offsets of one topic, and the group
// once it has none left.
func (d *draft) deleteGroupTopic(group, topic string) {
	b := d.tx.Bucket(bucketOffsets)
	for p := range d.img.groups[group][topic] {
		d.must(b.Delete(offsetKey(group, topic, p)))
	}
	g := d.ownGroup(group)
	delete(g, topic)
	delete(d.ownGroupTopics, groupTopic{group, topic})
	if len(g) == 0 {
		delete(d.img.groups, group)
		delete(d.ownGroups, group)
	}
}

// deleteTopicOffsets removes a deleted topic's offsets from every group,
// so that a topic created again under the name starts with none.
func (d *draft) deleteTopicOffsets(topic string) {
	var groups []string
	for group, g := range d.img.groups {
		if _, ok := g[topic]; ok {
			groups = append(groups, group)
		}
	}
	for _, group := range groups {
		d.deleteGroupTopic(group, topic)
	}
}
