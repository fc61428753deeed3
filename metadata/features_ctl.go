package metadata

import (
	"context"
	"fmt"
	"strings"

	pb "github.com/quirelog/quire/api/metapb"
)

// UpdateMetadataVersion finalizes metadata.version at level and returns
// the finalized level. The current level answers at once; a lower one, one
// beyond this controller's range, or one a registered broker (fenced ones
// included) does not support is ErrFeatureUpdateFailed, naming them.
func (c *Controller) UpdateMetadataVersion(ctx context.Context, level int32) (int32, error) {
	if err := c.active(ctx); err != nil {
		return 0, err
	}
	img := c.n.Image()
	have := img.MetadataVersion()
	own := c.n.cfg.MetadataVersions
	switch {
	case level == have:
		return have, nil
	case level < have:
		return 0, fmt.Errorf("%w: %s %d is below the finalized %d: levels only rise", ErrFeatureUpdateFailed, MetadataVersionFeature, level, have)
	case !own.Contains(level):
		return 0, fmt.Errorf("%w: %s %d: the controller (node %d) supports %s", ErrFeatureUpdateFailed, MetadataVersionFeature, level, c.n.cfg.NodeID, own)
	}
	if lack := lackingBrokers(img, level); len(lack) > 0 {
		return 0, fmt.Errorf("%w: %s %d: brokers without it: %s (upgrade them first)", ErrFeatureUpdateFailed, MetadataVersionFeature, level, strings.Join(lack, ", "))
	}
	if err := c.finalize(ctx, level); err != nil {
		return 0, err
	}
	return level, nil
}

func (c *Controller) finalize(ctx context.Context, level int32) error {
	from := c.n.Image().MetadataVersion()
	_, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_FeatureLevel{FeatureLevel: &pb.FeatureLevel{Name: MetadataVersionFeature, Level: level}}})
	if err != nil {
		return err
	}
	c.n.logger.Info("finalized feature level", "feature", MetadataVersionFeature, "from", from, "level", level)
	return nil
}

// raiseMetadataVersion finalizes the highest level every registered broker
// and this controller support, when it is above the finalized one (the
// controller loop's automatic upgrade, unless ManualMetadataVersion). It
// waits until every voter has registered, so that a cluster still forming
// is not raised past a voter of an older release that registers last.
func (c *Controller) raiseMetadataVersion(ctx context.Context) {
	img := c.n.Image()
	brokers := img.Brokers()
	for _, v := range c.n.cfg.Voters {
		if _, ok := img.Broker(v.ID); !ok {
			return
		}
	}
	target := c.n.cfg.MetadataVersions.Max
	for _, b := range brokers {
		target = min(target, b.MetadataVersions.orBaseline().Max)
	}
	if target <= img.MetadataVersion() || len(lackingBrokers(img, target)) > 0 {
		return
	}
	if err := c.finalize(ctx, target); err != nil && ctx.Err() == nil {
		c.n.logger.Warn("cannot raise feature level", "feature", MetadataVersionFeature, "level", target, "error", err)
	}
}

// levelRising reports whether metadata.version is below level and the
// controller will raise it there on its own (raiseMetadataVersion): it is
// not kept by hand, this node supports level, and no registered broker
// lacks it (the controller waits for the voters still to register).
func (c *Controller) levelRising(level int32) bool {
	img := c.n.Image()
	return !c.n.cfg.ManualMetadataVersion && img.MetadataVersion() < level &&
		level <= c.n.cfg.MetadataVersions.Max && len(lackingBrokers(img, level)) == 0
}

// AllocateProducerIDs hands a broker, at its current broker epoch, the
// next block of ProducerIDBlockSize producer ids. It needs metadata.version
// 2 (ErrUnsupportedVersion before).
func (c *Controller) AllocateProducerIDs(ctx context.Context, brokerID int32, brokerEpoch int64) (ProducerIDBlock, error) {
	resp, err := c.propose(ctx, &pb.Command{Cmd: &pb.Command_AllocateProducerIds{AllocateProducerIds: &pb.AllocateProducerIds{
		BrokerId: brokerID, BrokerEpoch: brokerEpoch,
	}}})
	if err != nil {
		return ProducerIDBlock{}, err
	}
	return resp.(ProducerIDBlock), nil
}
