package metadata

import (
	"context"
	"fmt"

	pb "github.com/quirelog/quire/api/metapb"
)

// Deleting some of a group's committed offsets (Kafka's OffsetDelete).
// The coordinator decides, in the group's turn, which partitions its
// members leave alone (those of topics no member subscribes to) and
// writes their deletion there, so that no member subscribes between the
// check and the write; the FSM then removes whatever offsets of those
// partitions it still has.

// OffsetDeleteResult is one partition's answer to DeleteOffsets: Err nil
// when the group has no offset of it any more.
type OffsetDeleteResult struct {
	Topic     string
	Partition int32
	Err       error
}

// DeleteOffsets removes group's committed offsets of partitions, each on
// its own: a partition of an unknown topic, or one the topic does not
// have, is ErrUnknownTopic; one of a topic a member of the group is
// subscribed to is ErrGroupSubscribedToTopic; one the group never
// committed in succeeds with nothing to remove. A group with neither
// members nor offsets is ErrUnknownGroup. The results are in the order of
// partitions.
func (c *Controller) DeleteOffsets(ctx context.Context, group string, partitions []TopicPartition) ([]OffsetDeleteResult, error) {
	if err := c.active(ctx); err != nil {
		return nil, err
	}
	if err := ValidateGroupID(group); err != nil {
		return nil, err
	}
	img := c.n.Image()
	if err := checkCommandLevel(img, &pb.Command{Cmd: &pb.Command_DeleteOffsets{DeleteOffsets: &pb.DeleteOffsets{}}}); err != nil {
		return nil, err
	}
	if !img.HasGroupState(group) && !img.HasOffsets(group) {
		return nil, fmt.Errorf("%w: %q has neither members nor committed offsets", ErrUnknownGroup, group)
	}
	out := make([]OffsetDeleteResult, len(partitions))
	var valid []TopicPartition
	seen := make(map[TopicPartition]bool, len(partitions))
	for i, tp := range partitions {
		out[i] = OffsetDeleteResult{Topic: tp.Topic, Partition: tp.Partition}
		t, ok := img.topics[tp.Topic]
		switch {
		case !ok:
			out[i].Err = fmt.Errorf("%w: topic %q does not exist", ErrUnknownTopic, tp.Topic)
		case tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions):
			out[i].Err = fmt.Errorf("%w: topic %q has no partition %d (it has %d)", ErrUnknownTopic, tp.Topic, tp.Partition, len(t.Partitions))
		case !seen[tp]:
			seen[tp] = true
			valid = append(valid, tp)
		}
	}
	if len(valid) == 0 {
		return out, nil
	}
	var subscribed map[string]bool
	var err error
	switch {
	case c.groups != nil:
		subscribed, err = c.groups.DeleteOffsets(ctx, group, valid)
	case img.HasGroupState(group):
		err = errNoCoordinator
	default:
		_, err = c.raftApply(ctx, DeleteOffsetsCommand(group, valid))
	}
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Err == nil && subscribed[out[i].Topic] {
			out[i].Err = fmt.Errorf("%w: a member of group %q is subscribed to topic %q; its offsets stay",
				ErrGroupSubscribedToTopic, group, out[i].Topic)
		}
	}
	return out, nil
}

// DeleteOffsetsCommand is the command that removes group's offsets of
// partitions.
func DeleteOffsetsCommand(group string, partitions []TopicPartition) *pb.Command {
	cmd := &pb.DeleteOffsets{Group: group, Partitions: make([]*pb.OffsetPartition, len(partitions))}
	for i, tp := range partitions {
		cmd.Partitions[i] = &pb.OffsetPartition{Topic: tp.Topic, Partition: tp.Partition}
	}
	return &pb.Command{Cmd: &pb.Command_DeleteOffsets{DeleteOffsets: cmd}}
}

// applyDeleteOffsets removes a group's offsets of the named partitions;
// one it has none of (never committed, or its topic deleted since) is
// skipped, so a deletion applies the same whatever happened in between.
func (d *draft) applyDeleteOffsets(c *pb.DeleteOffsets, _ uint64) any {
	if err := ValidateGroupID(c.Group); err != nil {
		return err
	}
	b := d.tx.Bucket(bucketOffsets)
	for _, p := range c.Partitions {
		if _, ok := d.img.groups[c.Group][p.Topic][p.Partition]; !ok {
			continue
		}
		if len(d.img.groups[c.Group][p.Topic]) == 1 {
			d.deleteGroupTopic(c.Group, p.Topic)
			continue
		}
		delete(d.groupTopicOffsets(c.Group, p.Topic), p.Partition)
		d.must(b.Delete(offsetKey(c.Group, p.Topic, p.Partition)))
	}
	return nil
}
