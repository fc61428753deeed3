package service

import (
	"context"
	"fmt"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
)

// DescribeFeatures answers the finalized metadata.version and each
// registered broker's supported range from this broker's image.
func (s *adminService) DescribeFeatures(_ context.Context, _ *quirev1.DescribeFeaturesRequest) (*quirev1.DescribeFeaturesResponse, error) {
	finalized, own, brokers := s.b.n.Features()
	out := &quirev1.DescribeFeaturesResponse{MetadataVersion: finalized,
		MinMetadataVersion: own.Min, MaxMetadataVersion: own.Max}
	for _, b := range brokers {
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
	level, err := b.n.UpdateFeatures(ctx, req.MetadataVersion)
	if err != nil {
		return nil, toStatus(fmt.Errorf("update %s to %d: %w", metadata.MetadataVersionFeature, req.MetadataVersion, err))
	}
	b.logger.Info("finalized feature level", "feature", metadata.MetadataVersionFeature, "level", level)
	return &quirev1.UpdateFeaturesResponse{MetadataVersion: level}, nil
}
