package controlplane

import (
	"context"

	pb "github.com/quirelog/quire/api/internalv1"
)

// UpdateFeatures raises the finalized metadata.version on this node's
// controller.
func (s *Service) UpdateFeatures(ctx context.Context, in *pb.UpdateFeaturesRequest) (*pb.UpdateFeaturesResponse, error) {
	level, err := s.node.Ctl().UpdateMetadataVersion(ctx, in.MetadataVersion)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.UpdateFeaturesResponse{MetadataVersion: level}, nil
}

// UpdateMetadataVersion raises the finalized metadata.version on the
// controller (see metadata.Controller.UpdateMetadataVersion) and returns
// the finalized level.
func (f *Forwarder) UpdateMetadataVersion(ctx context.Context, level int32) (int32, error) {
	resp, err := Call(ctx, f, (*Service).UpdateFeatures, pb.ControllerServiceClient.UpdateFeatures,
		&pb.UpdateFeaturesRequest{MetadataVersion: level})
	if err != nil {
		return 0, err
	}
	return resp.GetMetadataVersion(), nil
}
