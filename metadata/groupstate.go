package metadata

import (
	"fmt"
	"maps"
	"slices"
	"time"

	pb "github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/group"
)

// Consumer group membership in the metadata log. The coordinator's
// group.Machine returns records for every change of a group's state; the
// coordinator writes them as one GroupRecords command, and every node
// folds them into the image: per group, its epoch, each member's metadata
// and assignment, and the target assignment, which is all a new
// coordinator needs to Replay (GroupRecords lists them). The folded state
// is stored per group in bucketGroupState.

// groupState is one group as the records left it. It is never mutated
// once published in an image.
type groupState struct {
	epoch       group.GroupEpoch
	members     map[string]group.MemberMetadata
	assignments map[string]group.MemberAssignment
	target      group.TargetAssignment
}

func newGroupState(id string) *groupState {
	return &groupState{
		epoch:       group.GroupEpoch{Group: id, Topics: map[string]int32{}},
		members:     map[string]group.MemberMetadata{},
		assignments: map[string]group.MemberAssignment{},
		target:      group.TargetAssignment{Group: id, Members: map[string][]group.TopicPartition{}},
	}
}

func (s *groupState) clone() *groupState {
	c := *s
	c.members = maps.Clone(s.members)
	c.assignments = maps.Clone(s.assignments)
	c.target.Members = maps.Clone(s.target.Members)
	return &c
}

// fold applies one record to s, or says why it does not fit.
func (s *groupState) fold(r group.Record) error {
	switch r := r.(type) {
	case group.MemberMetadata:
		s.members[r.MemberID] = r
	case group.MemberAssignment:
		if _, ok := s.members[r.MemberID]; !ok {
			return fmt.Errorf("%w: assignment of member %q, unknown in group %q", ErrInvalidGroupRecords, r.MemberID, r.Group)
		}
		s.assignments[r.MemberID] = r
	case group.MemberRemoved:
		if _, ok := s.members[r.MemberID]; !ok {
			return fmt.Errorf("%w: removal of member %q, unknown in group %q", ErrInvalidGroupRecords, r.MemberID, r.Group)
		}
		delete(s.members, r.MemberID)
		delete(s.assignments, r.MemberID)
		delete(s.target.Members, r.MemberID)
	case group.GroupEpoch:
		s.epoch = r
	case group.TargetAssignment:
		s.target.Epoch = r.Epoch
		for id, ps := range r.Members {
			s.target.Members[id] = ps
		}
	default:
		return fmt.Errorf("%w: record type %T", ErrInvalidGroupRecords, r)
	}
	return nil
}

// records lists s as records that Replay rebuilds it from.
func (s *groupState) records() []group.Record {
	out := []group.Record{s.epoch}
	ids := slices.Sorted(maps.Keys(s.members))
	for _, id := range ids {
		out = append(out, s.members[id])
	}
	for _, id := range ids {
		if a, ok := s.assignments[id]; ok {
			out = append(out, a)
		}
	}
	return append(out, s.target)
}

// GroupRecords lists the records of every consumer group's membership
// state, group by group in id order, for a new coordinator to Replay.
func (img *Image) GroupRecords() []group.Record {
	var out []group.Record
	for _, id := range slices.Sorted(maps.Keys(img.groupStates)) {
		out = append(out, img.groupStates[id].records()...)
	}
	return out
}

// GroupMembers returns the records of one group's membership state; none
// for a group without members' state.
func (img *Image) GroupMembers(id string) []group.Record {
	if s, ok := img.groupStates[id]; ok {
		return s.records()
	}
	return nil
}

// applyGroupRecords folds a batch of group records into the image, all
// or none.
func (d *draft) applyGroupRecords(c *pb.GroupRecords, _ uint64) any {
	recs, err := groupRecordsFromPB(c)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("%w: no records", ErrInvalidGroupRecords)
	}
	work := map[string]*groupState{}
	deleted := map[string]bool{}
	for i, r := range recs {
		id := r.GroupID()
		if err := group.ValidateGroupID(id); err != nil {
			return fmt.Errorf("%w: record %d: %w", ErrInvalidGroupRecords, i, err)
		}
		s, ok := work[id]
		if !ok {
			if base, exists := d.img.groupStates[id]; exists && !deleted[id] {
				s = base.clone()
			}
		}
		if del, isDel := r.(group.GroupDeleted); isDel {
			if s == nil {
				return fmt.Errorf("%w: record %d: deletion of unknown group %q", ErrInvalidGroupRecords, i, del.Group)
			}
			if len(s.members) > 0 {
				return fmt.Errorf("%w: record %d: deletion of group %q, which has %d members", ErrInvalidGroupRecords, i, del.Group, len(s.members))
			}
			work[id], deleted[id] = nil, true
			continue
		}
		if s == nil {
			s = newGroupState(id)
		}
		if err := s.fold(r); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		work[id], deleted[id] = s, false
	}
	d.img.groupStates = maps.Clone(d.img.groupStates)
	if d.img.groupStates == nil {
		d.img.groupStates = map[string]*groupState{}
	}
	b := d.tx.Bucket(bucketGroupState)
	for id, s := range work {
		if s == nil {
			delete(d.img.groupStates, id)
			d.must(b.Delete([]byte(id)))
			continue
		}
		d.img.groupStates[id] = s
		d.put(bucketGroupState, []byte(id), groupStateToPB(s))
	}
	return nil
}

// loadGroupState reads one stored group state.
func loadGroupState(r *pb.GroupStateRecord) (*groupState, error) {
	if r.Epoch == nil || r.Target == nil {
		return nil, fmt.Errorf("%w: group state without epoch or target", ErrInvalidGroupRecords)
	}
	s := newGroupState(r.Epoch.Group)
	s.epoch = epochFromPB(r.Epoch)
	for _, m := range r.Members {
		s.members[m.MemberId] = metadataFromPB(m)
	}
	for _, a := range r.Assignments {
		s.assignments[a.MemberId] = assignmentFromPB(a)
	}
	s.target = targetFromPB(r.Target)
	return s, nil
}

func groupStateToPB(s *groupState) *pb.GroupStateRecord {
	r := &pb.GroupStateRecord{Epoch: epochToPB(s.epoch), Target: targetToPB(s.target)}
	ids := slices.Sorted(maps.Keys(s.members))
	for _, id := range ids {
		r.Members = append(r.Members, metadataToPB(s.members[id]))
		if a, ok := s.assignments[id]; ok {
			r.Assignments = append(r.Assignments, assignmentToPB(a))
		}
	}
	return r
}

// GroupRecordsToPB encodes group records for the metadata log.
func GroupRecordsToPB(recs []group.Record) *pb.GroupRecords {
	out := &pb.GroupRecords{Records: make([]*pb.GroupRecord, 0, len(recs))}
	for _, r := range recs {
		var g pb.GroupRecord
		switch r := r.(type) {
		case group.MemberMetadata:
			g.Record = &pb.GroupRecord_MemberMetadata{MemberMetadata: metadataToPB(r)}
		case group.MemberAssignment:
			g.Record = &pb.GroupRecord_MemberAssignment{MemberAssignment: assignmentToPB(r)}
		case group.MemberRemoved:
			g.Record = &pb.GroupRecord_MemberRemoved{MemberRemoved: &pb.GroupMemberRemoved{Group: r.Group, MemberId: r.MemberID}}
		case group.GroupEpoch:
			g.Record = &pb.GroupRecord_GroupEpoch{GroupEpoch: epochToPB(r)}
		case group.TargetAssignment:
			g.Record = &pb.GroupRecord_TargetAssignment{TargetAssignment: targetToPB(r)}
		case group.GroupDeleted:
			g.Record = &pb.GroupRecord_GroupDeleted{GroupDeleted: &pb.GroupDeletedRecord{Group: r.Group}}
		}
		out.Records = append(out.Records, &g)
	}
	return out
}

// groupRecordsFromPB decodes a batch; a record of a type this code does
// not know (a newer writer's) is ErrInvalidGroupRecords.
func groupRecordsFromPB(c *pb.GroupRecords) ([]group.Record, error) {
	out := make([]group.Record, 0, len(c.Records))
	for i, g := range c.Records {
		switch r := g.Record.(type) {
		case *pb.GroupRecord_MemberMetadata:
			out = append(out, metadataFromPB(r.MemberMetadata))
		case *pb.GroupRecord_MemberAssignment:
			out = append(out, assignmentFromPB(r.MemberAssignment))
		case *pb.GroupRecord_MemberRemoved:
			out = append(out, group.MemberRemoved{Group: r.MemberRemoved.Group, MemberID: r.MemberRemoved.MemberId})
		case *pb.GroupRecord_GroupEpoch:
			out = append(out, epochFromPB(r.GroupEpoch))
		case *pb.GroupRecord_TargetAssignment:
			out = append(out, targetFromPB(r.TargetAssignment))
		case *pb.GroupRecord_GroupDeleted:
			out = append(out, group.GroupDeleted{Group: r.GroupDeleted.Group})
		default:
			return nil, fmt.Errorf("%w: record %d has no type this code knows", ErrInvalidGroupRecords, i)
		}
	}
	return out, nil
}

func metadataToPB(r group.MemberMetadata) *pb.GroupMemberMetadata {
	return &pb.GroupMemberMetadata{Group: r.Group, MemberId: r.MemberID, InstanceId: r.InstanceID, SessionTimeoutMs: r.SessionTimeout.Milliseconds(), ClientAddress: r.ClientAddress,
		Topics: r.Topics, Regex: r.Regex, RebalanceTimeoutMs: r.RebalanceTimeout.Milliseconds(), Assignor: r.Assignor}
}

func metadataFromPB(r *pb.GroupMemberMetadata) group.MemberMetadata {
	return group.MemberMetadata{Group: r.Group, MemberID: r.MemberId, InstanceID: r.InstanceId, SessionTimeout: time.Duration(r.SessionTimeoutMs) * time.Millisecond, ClientAddress: r.ClientAddress,
		Topics: r.Topics, Regex: r.Regex, RebalanceTimeout: time.Duration(r.RebalanceTimeoutMs) * time.Millisecond, Assignor: r.Assignor}
}

func assignmentToPB(r group.MemberAssignment) *pb.GroupMemberAssignment {
	return &pb.GroupMemberAssignment{Group: r.Group, MemberId: r.MemberID, Epoch: r.Epoch, PreviousEpoch: r.PreviousEpoch,
		State: int32(r.State), Assigned: partitionsToPB(r.Assigned), PendingRevocation: partitionsToPB(r.PendingRevocation)}
}

func assignmentFromPB(r *pb.GroupMemberAssignment) group.MemberAssignment {
	return group.MemberAssignment{Group: r.Group, MemberID: r.MemberId, Epoch: r.Epoch, PreviousEpoch: r.PreviousEpoch,
		State: group.MemberState(r.State), Assigned: partitionsFromPB(r.Assigned), PendingRevocation: partitionsFromPB(r.PendingRevocation)}
}

func epochToPB(r group.GroupEpoch) *pb.GroupEpochRecord {
	out := &pb.GroupEpochRecord{Group: r.Group, Epoch: r.Epoch, Topics: r.Topics}
	if !r.EmptySince.IsZero() {
		out.EmptySinceMs = r.EmptySince.UnixMilli()
	}
	return out
}

func epochFromPB(r *pb.GroupEpochRecord) group.GroupEpoch {
	topics := r.Topics
	if topics == nil {
		topics = map[string]int32{}
	}
	out := group.GroupEpoch{Group: r.Group, Epoch: r.Epoch, Topics: topics}
	if r.EmptySinceMs != 0 {
		out.EmptySince = time.UnixMilli(r.EmptySinceMs)
	}
	return out
}

// groupRecordsStampEmpty reports whether c says since when a group is
// empty (metadata.version 4).
func groupRecordsStampEmpty(c *pb.GroupRecords) bool {
	for _, r := range c.GetRecords() {
		if r.GetGroupEpoch().GetEmptySinceMs() != 0 {
			return true
		}
	}
	return false
}

// groupRecordsStatic reports whether c names a static member's instance
// id or a classic member's session timeout (metadata.version 6).
func groupRecordsStatic(c *pb.GroupRecords) bool {
	for _, r := range c.GetRecords() {
		if md := r.GetMemberMetadata(); md.GetInstanceId() != "" || md.GetSessionTimeoutMs() != 0 {
			return true
		}
	}
	return false
}

// dropEmptySince clears the empty-since stamps of c, for a cluster below
// metadata.version 4: the coordinator that wrote them keeps them in
// memory, and another one counts from when it first saw the group empty.
func dropEmptySince(c *pb.GroupRecords) {
	for _, r := range c.GetRecords() {
		if e := r.GetGroupEpoch(); e != nil {
			e.EmptySinceMs = 0
		}
	}
}

func targetToPB(r group.TargetAssignment) *pb.GroupTargetAssignment {
	out := &pb.GroupTargetAssignment{Group: r.Group, Epoch: r.Epoch}
	for _, id := range slices.Sorted(maps.Keys(r.Members)) {
		out.Members = append(out.Members, &pb.GroupMemberTarget{MemberId: id, Partitions: partitionsToPB(r.Members[id])})
	}
	return out
}

func targetFromPB(r *pb.GroupTargetAssignment) group.TargetAssignment {
	out := group.TargetAssignment{Group: r.Group, Epoch: r.Epoch, Members: make(map[string][]group.TopicPartition, len(r.Members))}
	for _, m := range r.Members {
		out.Members[m.MemberId] = partitionsFromPB(m.Partitions)
	}
	return out
}

// partitionsToPB groups sorted partitions by topic.
func partitionsToPB(ps []group.TopicPartition) []*pb.GroupPartitions {
	var out []*pb.GroupPartitions
	for _, tp := range ps {
		if n := len(out); n == 0 || out[n-1].Topic != tp.Topic {
			out = append(out, &pb.GroupPartitions{Topic: tp.Topic})
		}
		last := out[len(out)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return out
}

func partitionsFromPB(in []*pb.GroupPartitions) []group.TopicPartition {
	out := []group.TopicPartition{}
	for _, t := range in {
		for _, p := range t.Partitions {
			out = append(out, group.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return out
}
