package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/txn"
)

// The calls the controller passes on (metadata.GroupCoordinator).

// Heartbeat handles one member's heartbeat (hb.Now is set here). The
// group's errors are group's sentinels; a coordinator that could not
// write the change is metadata.ErrNotCoordinator (retriable). Below
// metadata.version 6, which keeps instance ids and classic members'
// session timeouts, members are dynamic, with the coordinator's session
// timeout: those are dropped, and a static member's leave (-2) is a
// leave.
func (co *Coordinator) Heartbeat(ctx context.Context, hb group.Heartbeat) (group.Response, error) {
	var resp group.Response
	err := co.doGroup(ctx, hb.Group, func(m *group.Machine) ([]group.Record, error) {
		if co.log.Image().MetadataVersion() < metadata.MetadataVersionStaticMembers {
			hb.InstanceID, hb.SessionTimeout = "", 0
			if hb.MemberEpoch == group.StaticLeaveEpoch {
				hb.MemberEpoch = group.LeaveEpoch
			}
		}
		hb.Now = co.clock.Now()
		r, recs, err := m.Heartbeat(hb)
		resp = r
		return recs, err
	})
	if err != nil {
		return group.Response{}, err
	}
	return resp, nil
}

// Describe describes a group's membership. A group with committed
// offsets and no membership state (manual assignment) is described as
// empty.
func (co *Coordinator) Describe(ctx context.Context, id string) (group.Description, error) {
	var d group.Description
	err := co.doGroup(ctx, id, func(m *group.Machine) (recs []group.Record, err error) {
		d, err = m.Describe(id)
		return nil, err
	})
	if errors.Is(err, group.ErrUnknownGroup) && co.log.Image().HasOffsets(id) {
		return group.Description{Group: id, State: group.GroupEmpty}, nil
	}
	return d, err
}

// ValidateCommit fences an offset commit by the group's membership.
func (co *Coordinator) ValidateCommit(ctx context.Context, id string, member metadata.GroupMember) error {
	if co.log.Image().MetadataVersion() < metadata.MetadataVersionProducerIDs {
		// No membership before metadata.version 2: every commit is a
		// manual one.
		if member.ID != "" {
			return fmt.Errorf("%w: a commit from a group member needs %s %d", metadata.ErrUnsupportedVersion, metadata.MetadataVersionFeature, metadata.MetadataVersionProducerIDs)
		}
		return nil
	}
	return co.doGroup(ctx, id, func(m *group.Machine) ([]group.Record, error) {
		return nil, m.ValidateCommit(id, member.ID, member.Epoch)
	})
}

// ValidateTxnCommit fences a transaction's offsets by the group's
// membership: the member they are sent as must be in the group at its
// epoch and own each partition (group.Machine.ValidateTxnCommit).
func (co *Coordinator) ValidateTxnCommit(ctx context.Context, id string, member txn.Member, parts []group.TopicPartition) error {
	if member == (txn.Member{}) {
		return group.ValidateGroupID(id)
	}
	if co.log.Image().MetadataVersion() < metadata.MetadataVersionProducerIDs {
		return fmt.Errorf("%w: offsets sent as a group member need %s %d", metadata.ErrUnsupportedVersion, metadata.MetadataVersionFeature, metadata.MetadataVersionProducerIDs)
	}
	return co.doGroup(ctx, id, func(m *group.Machine) ([]group.Record, error) {
		return nil, m.ValidateTxnCommit(id, member.ID, member.InstanceID, member.Epoch, parts)
	})
}

// DeleteMembership refuses to delete a group with members
// (group.ErrNonEmptyGroup) and removes the state of an empty one.
func (co *Coordinator) DeleteMembership(ctx context.Context, id string) error {
	if co.log.Image().MetadataVersion() < metadata.MetadataVersionProducerIDs {
		return nil
	}
	return co.doGroup(ctx, id, func(m *group.Machine) ([]group.Record, error) {
		if n := m.Size(id); n > 0 {
			return nil, fmt.Errorf("%w: group %q has %d members", group.ErrNonEmptyGroup, id, n)
		}
		if !co.log.Image().HasGroupState(id) {
			return nil, nil
		}
		return m.Delete(id)
	})
}

// States returns the state of every group the coordinator has.
func (co *Coordinator) States(ctx context.Context) (map[string]group.GroupState, error) {
	term, err := co.begin(ctx)
	if err != nil {
		return nil, err
	}
	states := map[string]group.GroupState{}
	for _, id := range co.ids() {
		err := co.look(ctx, id, term, func(g *groupRun) {
			for _, l := range g.m.Groups() {
				states[l.Group] = l.State
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return states, nil
}

// The controller runs the coordinator, which writes through its log.
var (
	_ metadata.GroupCoordinator = (*Coordinator)(nil)
	_ Log                       = (*metadata.GroupLog)(nil)
)
