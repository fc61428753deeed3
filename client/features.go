package client

import (
	"context"
	"sort"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// Features is the cluster's finalized metadata.version feature level (the
// metadata command set every node applies) and the range of levels each
// registered broker supports.
type Features struct {
	MetadataVersion int32            `json:"metadata_version"`
	Brokers         []BrokerFeatures `json:"brokers"`
}

// BrokerFeatures is one registered broker's supported metadata.version
// range.
type BrokerFeatures struct {
	ID                 int32 `json:"id"`
	MinMetadataVersion int32 `json:"min_metadata_version"`
	MaxMetadataVersion int32 `json:"max_metadata_version"`
	Fenced             bool  `json:"fenced"`
}

// DescribeFeatures returns the finalized metadata.version and every
// broker's supported range.
func (c *Client) DescribeFeatures(ctx context.Context) (*Features, error) {
	var resp *quirev1.DescribeFeaturesResponse
	err := c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) (err error) {
		resp, err = a.DescribeFeatures(ctx, &quirev1.DescribeFeaturesRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	f := &Features{MetadataVersion: resp.GetMetadataVersion()}
	for _, b := range resp.GetBrokers() {
		f.Brokers = append(f.Brokers, BrokerFeatures{ID: b.GetBrokerId(), MinMetadataVersion: b.GetMinMetadataVersion(),
			MaxMetadataVersion: b.GetMaxMetadataVersion(), Fenced: b.GetFenced()})
	}
	sort.Slice(f.Brokers, func(i, j int) bool { return f.Brokers[i].ID < f.Brokers[j].ID })
	return f, nil
}

// UpdateFeatures finalizes metadata.version at level and returns the
// finalized level. It fails with FEATURE_UPDATE_FAILED below the current
// level, or when a registered broker does not support level (the message
// names them).
func (c *Client) UpdateFeatures(ctx context.Context, metadataVersion int32) (int32, error) {
	var resp *quirev1.UpdateFeaturesResponse
	err := c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) (err error) {
		resp, err = a.UpdateFeatures(ctx, &quirev1.UpdateFeaturesRequest{MetadataVersion: metadataVersion})
		return err
	})
	if err != nil {
		return 0, err
	}
	return resp.GetMetadataVersion(), nil
}
