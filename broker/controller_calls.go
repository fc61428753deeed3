package broker

// Calls to the controller, local or forwarded (controlplane.Forwarder),
// each bounded by metadata.write.timeout.ms.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quirelog/quire/metadata"
)

// Admin writes, validated by the caller, go to the controller.

// writeContext bounds a write by metadata.write.timeout.ms unless ctx
// ends sooner: with a majority of voters lost the Forwarder would retry
// for ever, and the caller must get UNAVAILABLE instead.
func (c *cluster) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, ms(c.cfg.MetadataWriteTimeoutMs))
}

// unavailable turns a write that found no controller in time into
// ErrNoQuorum (UNAVAILABLE, retriable) rather than a bare deadline, unless
// the caller's own deadline ended it.
func unavailable(parent context.Context, err error) error {
	if err == nil || errors.Is(err, metadata.ErrNoQuorum) || parent.Err() != nil {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: no controller answered: %w", metadata.ErrNoQuorum, err)
	}
	return err
}

func (c *cluster) createTopic(ctx context.Context, spec metadata.TopicSpec) (metadata.TopicInfo, error) {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	info, err := c.fwd.CreateTopic(wctx, spec)
	return info, unavailable(ctx, err)
}

func (c *cluster) deleteTopic(ctx context.Context, name string) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.DeleteTopic(wctx, name))
}

func (c *cluster) alterConfigs(ctx context.Context, topic string, set map[string]string, del []string) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.AlterConfigs(wctx, topic, set, del))
}

func (c *cluster) createPartitions(ctx context.Context, topic string, total int32) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.CreatePartitions(wctx, topic, total))
}

func (c *cluster) unregisterBroker(ctx context.Context, id int32) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.UnregisterBroker(wctx, id))
}

// Consumer group offsets live in the controller's image: commits are
// written through it and reads answered by it, so a commit made through
// any node is read back at once through any other. Reads are bounded like
// writes, so that without a controller they fail UNAVAILABLE.

func (c *cluster) commitOffsets(ctx context.Context, group string, offsets []metadata.OffsetCommit, at time.Time) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.CommitOffsets(wctx, group, offsets, at))
}

func (c *cluster) fetchOffsets(ctx context.Context, group string, partitions []metadata.TopicPartition) ([]metadata.CommittedOffset, error) {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	out, err := c.fwd.FetchOffsets(wctx, group, partitions)
	return out, unavailable(ctx, err)
}

func (c *cluster) listGroups(ctx context.Context) ([]string, error) {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	out, err := c.fwd.ListGroups(wctx)
	return out, unavailable(ctx, err)
}

func (c *cluster) deleteGroup(ctx context.Context, group string) error {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return unavailable(ctx, c.fwd.DeleteGroup(wctx, group))
}
