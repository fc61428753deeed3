package controlplane

import (
	"context"
	"fmt"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/api/metapb"
	"github.com/quirelog/quire/metadata"
)

// PutShareStates stores share-partitions' states on this node's
// controller, answering each one's refusal as a string ("" stored).
func (s *Service) PutShareStates(ctx context.Context, in *pb.PutShareStatesRequest) (*pb.PutShareStatesResponse, error) {
	states := make([]metadata.ShareState, len(in.GetStates().GetStates()))
	for i, r := range in.GetStates().GetStates() {
		states[i] = metadata.ShareStateFromPB(r)
	}
	res, err := s.node.Ctl().PutShareStates(ctx, in.GetStates().GetBrokerId(), states)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.PutShareStatesResponse{Errors: make([]string, len(res))}
	for i, e := range res {
		if e != nil {
			out.Errors[i] = e.Error()
		}
	}
	return out, nil
}

// PutShareStates writes share-partitions' states led by broker through
// the controller, in one metadata log entry, and answers each one's
// refusal (nil: stored; a refusal wraps metadata.ErrShareStateFenced: the
// broker no longer leads the partition at the state's epoch). An error
// for the whole call leaves it unknown whether they were stored.
func (f *Forwarder) PutShareStates(ctx context.Context, broker int32, states []metadata.ShareState) ([]error, error) {
	req := &pb.PutShareStatesRequest{States: &metapb.PutShareStates{BrokerId: broker}}
	for _, s := range states {
		req.States.States = append(req.States.States, metadata.ShareStateToPB(s))
	}
	resp, err := Call(ctx, f, (*Service).PutShareStates, pb.ControllerServiceClient.PutShareStates, req)
	if err != nil {
		return nil, err
	}
	if len(resp.GetErrors()) != len(states) {
		return nil, fmt.Errorf("controlplane: %d share states answered with %d results", len(states), len(resp.GetErrors()))
	}
	out := make([]error, len(states))
	for i, e := range resp.GetErrors() {
		if e != "" {
			out[i] = fmt.Errorf("%w (%s)", metadata.ErrShareStateFenced, e)
		}
	}
	return out, nil
}

// PutShareGroupConfig replaces a share group's settings on this node's
// controller.
func (s *Service) PutShareGroupConfig(ctx context.Context, in *pb.PutShareGroupConfigRequest) (*pb.PutShareGroupConfigResponse, error) {
	gen, err := s.node.Ctl().PutShareGroupConfig(ctx, in.GetConfig().GetGroup(), in.GetConfig().GetConfigs(), in.GetConfig().GetDelete())
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.PutShareGroupConfigResponse{Generation: gen}, nil
}

// DeleteShareGroup removes a share group's saved state on this node's
// controller.
func (s *Service) DeleteShareGroup(ctx context.Context, in *pb.DeleteShareGroupRequest) (*pb.DeleteShareGroupResponse, error) {
	r, err := s.node.Ctl().DeleteShareGroup(ctx, in.GetDelete().GetGroup(), in.GetDelete().GetTopics())
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteShareGroupResponse{States: int32(r.States), Generation: r.Generation}, nil
}

// PutShareGroupConfig changes a share group's settings through the
// controller (metadata.version 16): del back to the node's, set set;
// it answers the group's settings generation after the change.
func (f *Forwarder) PutShareGroupConfig(ctx context.Context, group string, set map[string]string, del []string) (uint64, error) {
	resp, err := Call(ctx, f, (*Service).PutShareGroupConfig, pb.ControllerServiceClient.PutShareGroupConfig,
		&pb.PutShareGroupConfigRequest{Config: &metapb.PutShareGroupConfig{Group: group, Configs: set, Delete: del}})
	if err != nil {
		return 0, err
	}
	return resp.GetGeneration(), nil
}

// DeleteShareGroup removes a share group's saved states and settings (or
// with topics, its states on them) through the controller and answers
// how many states went and the group's generation after the delete.
func (f *Forwarder) DeleteShareGroup(ctx context.Context, group string, topics []string) (metadata.ShareGroupDeleted, error) {
	resp, err := Call(ctx, f, (*Service).DeleteShareGroup, pb.ControllerServiceClient.DeleteShareGroup,
		&pb.DeleteShareGroupRequest{Delete: &metapb.DeleteShareGroup{Group: group, Topics: topics}})
	if err != nil {
		return metadata.ShareGroupDeleted{}, err
	}
	return metadata.ShareGroupDeleted{States: int(resp.GetStates()), Generation: resp.GetGeneration()}, nil
}

// AlterShareGroupOffsets sets share-partitions' start offsets on this
// node's controller.
func (s *Service) AlterShareGroupOffsets(ctx context.Context, in *pb.AlterShareGroupOffsetsRequest) (*pb.AlterShareGroupOffsetsResponse, error) {
	a := in.GetAlter()
	offsets := make([]metadata.ShareStartOffset, len(a.GetOffsets()))
	for i, o := range a.GetOffsets() {
		offsets[i] = metadata.ShareStartOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), StartOffset: o.GetStartOffset()}
	}
	gen, err := s.node.Ctl().AlterShareGroupOffsets(ctx, a.GetGroup(), offsets)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.AlterShareGroupOffsetsResponse{Generation: gen}, nil
}

// AlterShareGroupOffsets sets the start offsets of share-partitions of
// a group with no members through the controller (metadata.version 17)
// and answers the group's settings generation after the change.
func (f *Forwarder) AlterShareGroupOffsets(ctx context.Context, group string, offsets []metadata.ShareStartOffset) (uint64, error) {
	cmd := metadata.AlterShareGroupOffsetsCommand(group, offsets).GetAlterShareGroupOffsets()
	resp, err := Call(ctx, f, (*Service).AlterShareGroupOffsets, pb.ControllerServiceClient.AlterShareGroupOffsets,
		&pb.AlterShareGroupOffsetsRequest{Alter: cmd})
	if err != nil {
		return 0, err
	}
	return resp.GetGeneration(), nil
}
