package metadata

import (
	"cmp"
	"maps"
	"slices"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
)

// What the group coordinator (package coordinator) reads of the image and
// how it encodes what it writes: the image's group state stays private to
// this package, and the raft command's format is defined here alone.

// HasGroupState tells whether group id has membership state in the image
// (members, or an empty group's epoch).
func (img *Image) HasGroupState(id string) bool {
	_, ok := img.groupStates[id]
	return ok
}

// HasOffsets tells whether group id has committed offsets.
func (img *Image) HasOffsets(id string) bool {
	_, ok := img.groups[id]
	return ok
}

// GroupStateIDs returns the ids of the groups with membership state,
// sorted.
func (img *Image) GroupStateIDs() []string {
	return slices.Sorted(maps.Keys(img.groupStates))
}

// GroupStateMembers returns how many members group id has in the image.
func (img *Image) GroupStateMembers(id string) int {
	if s, ok := img.groupStates[id]; ok {
		return len(s.members)
	}
	return 0
}

// GroupOwners maps each partition assigned in group id to its member.
func (img *Image) GroupOwners(id string) map[group.TopicPartition]string {
	out := map[group.TopicPartition]string{}
	if s, ok := img.groupStates[id]; ok {
		for mid, a := range s.assignments {
			for _, tp := range a.Assigned {
				out[tp] = mid
			}
		}
	}
	return out
}

// GroupMemberView is one member of a group as the image has it: what a
// Subscribe stream watches to act on the coordinator's decisions as
// soon as they reach its node, not at its next heartbeat.
type GroupMemberView struct {
	// GroupEpoch is the group's epoch: past the member's, the
	// coordinator has a change (a member gone or come, a subscription
	// changed) for the next heartbeat to compute the target of.
	GroupEpoch int32
	// Epoch is the member's epoch.
	Epoch int32
	// Target is the member's target assignment, sorted.
	Target []group.TopicPartition
	// Held is, of Target, the partitions another member is still
	// assigned or has still to give up, sorted.
	Held []group.TopicPartition
}

// GroupMember is member of group id as the image has it; false when the
// image has no such member.
func (img *Image) GroupMember(id, member string) (GroupMemberView, bool) {
	s, ok := img.groupStates[id]
	if !ok {
		return GroupMemberView{}, false
	}
	a, ok := s.assignments[member]
	if !ok {
		return GroupMemberView{}, false
	}
	v := GroupMemberView{GroupEpoch: s.epoch.Epoch, Epoch: a.Epoch, Target: slices.Clone(s.target.Members[member])}
	slices.SortFunc(v.Target, compareTP)
	for mid, o := range s.assignments {
		if mid == member {
			continue
		}
		for _, tp := range slices.Concat(o.Assigned, o.PendingRevocation) {
			if _, in := slices.BinarySearchFunc(v.Target, tp, compareTP); in {
				v.Held = append(v.Held, tp)
			}
		}
	}
	slices.SortFunc(v.Held, compareTP)
	return v, true
}

func compareTP(a, b group.TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// PartitionCounts maps every topic to its number of partitions.
func (img *Image) PartitionCounts() map[string]int32 {
	out := make(map[string]int32, len(img.topics))
	for name, t := range img.topics {
		out[name] = int32(len(t.Partitions))
	}
	return out
}

// GroupRecordsCommand is the command that writes recs (of one group, or a
// replay of several) to the metadata log, for a cluster at level: below
// metadata.version 4 without the empty-since stamps, which such a cluster
// does not keep.
func GroupRecordsCommand(recs []group.Record, level int32) *pb.Command {
	enc := GroupRecordsToPB(recs)
	if level < MetadataVersionGroupEmptySince {
		dropEmptySince(enc)
	}
	return &pb.Command{Cmd: &pb.Command_GroupRecords{GroupRecords: enc}}
}
