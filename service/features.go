package broker

import (
	"context"
	"fmt"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
)

// DescribeFeatures answers the finalized metadata.version and each
// registered broker's supported range from this broker's image.
func (s *adminService) DescribeFeatures(_ context.Context, _ *quirev1.DescribeFeaturesRequest) (*quirev1.DescribeFeaturesResponse, error) {
	img := s.b.cluster.image()
	own := s.b.cluster.node.MetadataVersions()
	out := &quirev1.DescribeFeaturesResponse{MetadataVersion: img.MetadataVersion(),
		MinMetadataVersion: own.Min, MaxMetadataVersion: own.Max}
	for _, b := range img.Brokers() {
		out.Brokers = append(out.Brokers, &quirev1.BrokerFeatures{BrokerId: b.ID,
			MinMetadataVersion: b.MetadataVersions.Min, MaxMetadataVersion: b.MetadataVersions.Max, Fenced: b.Fenced})
	}
	return out, nil
}

// UpdateFeatures raises the finalized metadata.version through the
// controller and returns once this broker's image has it.
func (s *adminService) UpdateFeatures(ctx context.Context, req *quirev1.UpdateFeaturesRequest) (*quirev1.UpdateFeaturesResponse, error) {
	b := s.b
	if req.MetadataVersion < metadata.MetadataVersionBaseline {
		return nil, toStatus(fmt.Errorf("%w: metadata_version %d: levels start at %d", ErrInvalidRequest, req.MetadataVersion, metadata.MetadataVersionBaseline))
	}
	level, err := b.cluster.fwd.UpdateMetadataVersion(ctx, req.MetadataVersion)
	if err != nil {
		return nil, toStatus(fmt.Errorf("update %s to %d: %w", metadata.MetadataVersionFeature, req.MetadataVersion, err))
	}
	if _, err := b.cluster.waitFor(ctx, func(img *metadata.Image) bool { return img.MetadataVersion() >= level }); err != nil {
		return nil, toStatus(fmt.Errorf("update %s to %d: waiting for the metadata: %w", metadata.MetadataVersionFeature, level, err))
	}
	b.logger.Info("finalized feature level", "feature", metadata.MetadataVersionFeature, "level", level)
	return &quirev1.UpdateFeaturesResponse{MetadataVersion: level}, nil
}
