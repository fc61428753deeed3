package controlplane

import (
	"context"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/metadata"
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
	var out int32
	err := f.do(ctx, func(c *metadata.Controller) (err error) {
		out, err = c.UpdateMetadataVersion(ctx, level)
		return err
	}, func(c pb.ControllerServiceClient) error {
		resp, err := c.UpdateFeatures(ctx, &pb.UpdateFeaturesRequest{MetadataVersion: level})
		if err == nil {
			out = resp.MetadataVersion
		}
		return err
	})
	return out, err
}
