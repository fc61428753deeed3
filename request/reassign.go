package request

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
)

// Reassigner is partition reassignment and broker cordons on the
// controller; each call returns once this broker's image has the change.
type Reassigner interface {
	ReassignPartitions(ctx context.Context, rs []metadata.Reassignment, minISR map[string]int32) error
	CordonBroker(ctx context.Context, id int32, cordon bool) error
	SetReassignmentThrottle(ctx context.Context, ids []int32, bytesPerSecond int64, unset bool) error
}

// ReassignmentTarget is one partition's new replicas, or a cancel
// (metadata.Reassignment), for the doors.
type ReassignmentTarget = metadata.Reassignment

// PendingReassignment is a partition with a pending reassignment: its
// replicas (target and those being removed), AddingReplicas and
// RemovingReplicas.
type PendingReassignment = metadata.PartitionInfo

// PartitionsOf names some partitions of a topic; none named is every one.
type PartitionsOf struct {
	Topic      string
	Partitions []int32
}

func (c *Core) reassigner() (Reassigner, error) {
	if c.cfg.Admin.Reassigner == nil {
		return nil, c.fail(fmt.Errorf("%w: this node does not serve partition reassignment", ErrPolicyViolation))
	}
	return c.cfg.Admin.Reassigner, nil
}

// AlterPartitionReassignments starts, replaces or cancels partition
// reassignments (KIP-455), all or none; it needs Alter on the cluster.
// Checked here first against this broker's image, and again by the
// controller as it applies them: a partition that does not exist
// (metadata.ErrUnknownTopic), a target with no replica, a broker twice,
// an unknown, fenced or cordoned broker to add, fewer replicas than the
// topic's min.insync.replicas, or replicas given with a cancel
// (metadata.ErrInvalidReassignment) refuse the whole request.
func (c *Core) AlterPartitionReassignments(ctx context.Context, rs []metadata.Reassignment) error {
	ra, err := c.startReassignments(ctx, rs)
	if err != nil {
		return err
	}
	errs, minISR := c.checkTargets(rs)
	for _, err := range errs {
		if err != nil {
			return c.fail(err)
		}
	}
	if err := ra.ReassignPartitions(ctx, rs, minISR); err != nil {
		return c.fail(fmt.Errorf("reassign partitions: %w", err))
	}
	return nil
}

// AlterPartitionReassignmentsEach is AlterPartitionReassignments
// partition by partition, as Kafka answers it: each partition refused
// (for the reasons AlterPartitionReassignments gives) has its own error
// in its result, in rs's order, and the others go ahead. A partition
// named twice is refused both times. The call's error is one that
// concerns every partition (authorization, no partitions, no controller).
//
// The partitions that pass the check here go to the controller in one
// command. Should the controller refuse that (a move completed since this
// broker's image, say), each goes again alone, so that one partition's
// refusal does not hold back the rest.
func (c *Core) AlterPartitionReassignmentsEach(ctx context.Context, rs []metadata.Reassignment) ([]PartitionResult, error) {
	ra, err := c.startReassignments(ctx, rs)
	if err != nil {
		return nil, err
	}
	errs, minISR := c.checkTargets(rs)
	res := make([]PartitionResult, len(rs))
	var ok []metadata.Reassignment
	var okAt []int
	for i, r := range rs {
		res[i] = PartitionResult{Topic: r.Topic, Partition: r.Partition, Err: c.asError(errs[i])}
		if errs[i] == nil {
			ok, okAt = append(ok, r), append(okAt, i)
		}
	}
	if len(ok) == 0 {
		return res, nil
	}
	err = ra.ReassignPartitions(ctx, ok, minISR)
	if err != nil && len(ok) > 1 && c.partitionRefusal(err) {
		for j, r := range ok {
			if err := ra.ReassignPartitions(ctx, []metadata.Reassignment{r}, minISR); err != nil {
				res[okAt[j]].Err = c.asError(fmt.Errorf("reassign partitions: %w", err))
			}
		}
		return res, nil
	}
	if err != nil {
		e := c.asError(fmt.Errorf("reassign partitions: %w", err))
		for _, i := range okAt {
			res[i].Err = e
		}
	}
	return res, nil
}

// partitionRefusal reports whether the controller refused a reassignment
// for what one of its partitions is (rather than for the call).
func (c *Core) partitionRefusal(err error) bool {
	code := c.asError(err).Code
	for _, refusal := range []error{metadata.ErrInvalidReassignment, metadata.ErrNoReassignmentInProgress, metadata.ErrUnknownTopic} {
		if code == c.asError(refusal).Code {
			return true
		}
	}
	return false
}

// startReassignments is what both AlterPartitionReassignments ask first:
// Alter on the cluster, a reassigner, some partitions.
func (c *Core) startReassignments(ctx context.Context, rs []metadata.Reassignment) (Reassigner, error) {
	if err := c.authorize(ctx, auth.OpAlter, auth.ResourceCluster, auth.ClusterName, false); err != nil {
		return nil, err
	}
	ra, err := c.reassigner()
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, c.fail(fmt.Errorf("%w: no partitions to reassign", replica.ErrInvalidRequest))
	}
	return ra, nil
}

// checkTargets checks each of rs on this broker's image (nil where it
// passes), and gives the effective min.insync.replicas of the topics
// that exist.
func (c *Core) checkTargets(rs []metadata.Reassignment) ([]error, map[string]int32) {
	errs := make([]error, len(rs))
	minISR := map[string]int32{}
	count := map[metadata.TopicPartition]int{}
	for _, r := range rs {
		count[metadata.TopicPartition{Topic: r.Topic, Partition: r.Partition}]++
	}
	for i, r := range rs {
		if count[metadata.TopicPartition{Topic: r.Topic, Partition: r.Partition}] > 1 {
			errs[i] = fmt.Errorf("%w: %s-%d named twice", metadata.ErrInvalidReassignment, r.Topic, r.Partition)
			continue
		}
		t, ok := c.cfg.Cluster.Topic(r.Topic)
		if !ok || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
			errs[i] = fmt.Errorf("%w: %s-%d does not exist", metadata.ErrUnknownTopic, r.Topic, r.Partition)
			continue
		}
		if _, ok := minISR[r.Topic]; !ok {
			minISR[r.Topic] = c.minInsyncReplicas(t.Configs)
		}
		errs[i] = c.checkTarget(t.Partitions[r.Partition], r, minISR[r.Topic])
	}
	return errs, minISR
}

// checkTarget is the controller's check of one target on this broker's
// image (applyReassignPartitions makes it again).
func (c *Core) checkTarget(p metadata.PartitionInfo, r metadata.Reassignment, minISR int32) error {
	name := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
	if r.Cancel {
		if len(r.Replicas) > 0 {
			return fmt.Errorf("%w: %s: a cancel names no replicas", metadata.ErrInvalidReassignment, name)
		}
		if !p.Reassigning() {
			return fmt.Errorf("%w: %s", metadata.ErrNoReassignmentInProgress, name)
		}
		return nil
	}
	if len(r.Replicas) == 0 {
		return fmt.Errorf("%w: %s: no replicas (a cancel says so)", metadata.ErrInvalidReassignment, name)
	}
	for i, id := range r.Replicas {
		if slices.Contains(r.Replicas[:i], id) {
			return fmt.Errorf("%w: %s: broker %d named twice", metadata.ErrInvalidReassignment, name, id)
		}
		b, ok := c.cfg.Cluster.Broker(id)
		if !ok {
			return fmt.Errorf("%w: %s: broker %d is not registered", metadata.ErrInvalidReassignment, name, id)
		}
		if slices.Contains(p.Replicas, id) {
			continue
		}
		if b.Fenced {
			return fmt.Errorf("%w: %s: broker %d is fenced", metadata.ErrInvalidReassignment, name, id)
		}
		if b.Cordoned {
			return fmt.Errorf("%w: %s: broker %d is cordoned", metadata.ErrInvalidReassignment, name, id)
		}
	}
	if int32(len(r.Replicas)) < minISR {
		return fmt.Errorf("%w: %s: %d replicas, below the topic's min.insync.replicas %d", metadata.ErrInvalidReassignment, name, len(r.Replicas), minISR)
	}
	return nil
}

// minInsyncReplicas is a topic's effective min.insync.replicas: its
// override or this broker's default.
func (c *Core) minInsyncReplicas(overrides map[string]string) int32 {
	if c.cfg.Admin.TopicConfigs == nil {
		return 1
	}
	for _, e := range c.cfg.Admin.TopicConfigs(overrides) {
		if e.Name == "min.insync.replicas" {
			if n, err := strconv.ParseInt(e.Value, 10, 32); err == nil {
				return int32(n)
			}
		}
	}
	return 1
}

// ListPartitionReassignments answers the pending reassignments of the
// partitions named (every partition of a topic naming none), or of every
// partition when no topic is named, from this broker's image; it needs
// Describe on the cluster. A named topic or partition that does not exist
// is metadata.ErrUnknownTopic.
func (c *Core) ListPartitionReassignments(ctx context.Context, topics []PartitionsOf) ([]metadata.PartitionInfo, error) {
	if err := c.authorize(ctx, auth.OpDescribe, auth.ResourceCluster, auth.ClusterName, false); err != nil {
		return nil, err
	}
	var out []metadata.PartitionInfo
	if len(topics) == 0 {
		for _, t := range c.cfg.Cluster.Topics() {
			for _, p := range t.Partitions {
				if p.Reassigning() {
					out = append(out, p)
				}
			}
		}
		return out, nil
	}
	for _, want := range topics {
		t, ok := c.cfg.Cluster.Topic(want.Topic)
		if !ok {
			return nil, c.fail(fmt.Errorf("%w: topic %q does not exist", metadata.ErrUnknownTopic, want.Topic))
		}
		parts := want.Partitions
		if len(parts) == 0 {
			for i := range t.Partitions {
				parts = append(parts, int32(i))
			}
		}
		for _, p := range parts {
			if p < 0 || int(p) >= len(t.Partitions) {
				return nil, c.fail(fmt.Errorf("%w: %s-%d does not exist", metadata.ErrUnknownTopic, want.Topic, p))
			}
			if t.Partitions[p].Reassigning() {
				out = append(out, t.Partitions[p])
			}
		}
	}
	return out, nil
}

// CordonBroker cordons a broker (no new replica is placed on it) or
// uncordons it; it needs Alter on the cluster.
func (c *Core) CordonBroker(ctx context.Context, id int32, cordon bool) error {
	if err := c.authorize(ctx, auth.OpAlter, auth.ResourceCluster, auth.ClusterName, false); err != nil {
		return err
	}
	ra, err := c.reassigner()
	if err != nil {
		return err
	}
	if _, ok := c.cfg.Cluster.Broker(id); !ok {
		return c.fail(fmt.Errorf("%w: %d", metadata.ErrUnknownBroker, id))
	}
	if err := ra.CordonBroker(ctx, id, cordon); err != nil {
		return c.fail(fmt.Errorf("cordon broker %d: %w", id, err))
	}
	return nil
}

// SetReassignmentThrottle sets the brokers' (none named: every broker's)
// replica.reassignment.throttle.bytes.per.second, or with unset returns
// them to their configuration's; it needs Alter on the cluster.
func (c *Core) SetReassignmentThrottle(ctx context.Context, ids []int32, bytesPerSecond int64, unset bool) error {
	if err := c.authorize(ctx, auth.OpAlter, auth.ResourceCluster, auth.ClusterName, false); err != nil {
		return err
	}
	ra, err := c.reassigner()
	if err != nil {
		return err
	}
	if bytesPerSecond < 0 && !unset {
		return c.fail(fmt.Errorf("%w: negative throttle %d", replica.ErrInvalidRequest, bytesPerSecond))
	}
	for _, id := range ids {
		if _, ok := c.cfg.Cluster.Broker(id); !ok {
			return c.fail(fmt.Errorf("%w: %d", metadata.ErrUnknownBroker, id))
		}
	}
	if err := ra.SetReassignmentThrottle(ctx, ids, bytesPerSecond, unset); err != nil {
		return c.fail(fmt.Errorf("set reassignment throttle: %w", err))
	}
	return nil
}
