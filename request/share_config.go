package request

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
)

// A share group's own settings (Kafka's GROUP config resource) and the
// deletion of its saved state, both kept in the metadata log through the
// ShareGroupStore: the share coordinator of every node reads them from
// its image (sharegroup.ConfigSource).

// ShareGroupStore is the metadata log as the share groups' settings and
// saved state live there.
type ShareGroupStore interface {
	// Supported says whether the cluster's metadata.version keeps share
	// group settings (16).
	Supported() bool
	// ShareGroupConfig is the group's own settings; nil for none.
	ShareGroupConfig(group string) map[string]string
	// HasShareGroup says whether the group has a saved share-partition
	// state or settings of its own.
	HasShareGroup(group string) bool
	// HasShareState says whether the group has a saved share-partition
	// state.
	HasShareState(group string) bool
	// PutShareGroupConfig changes the group's settings, on those the
	// metadata log holds when it applies the change (del back to the
	// node's, set set), and returns once this node's image holds them.
	PutShareGroupConfig(ctx context.Context, group string, set map[string]string, del []string) error
	// DeleteShareGroup removes the group's saved states and settings (with
	// topics, its states on them only) and returns once this node's image
	// no longer holds them.
	DeleteShareGroup(ctx context.Context, group string, topics []string) error
	// ShareStarts are the group's saved share-partition states' start
	// offsets, sorted by topic and partition.
	ShareStarts(group string) []ShareStartOffset
	// OffsetsSupported says whether the cluster's metadata.version sets
	// start offsets (18).
	OffsetsSupported() bool
	// AlterShareGroupOffsets replaces the group's states on the
	// partitions named by new ones starting at the offsets given, and
	// returns once this node's image holds them.
	AlterShareGroupOffsets(ctx context.Context, group string, offsets []ShareStartOffset) error
}

// ErrShareConfigUnsupported: the cluster's metadata.version is below 16,
// or this node keeps no share group settings.
var ErrShareConfigUnsupported = errors.New("request: share group settings need metadata.version 16 on every node")

// shareStore is the store of share group settings, or why there is none.
func (c *Core) shareStore() (ShareGroupStore, error) {
	if c.cfg.ShareStore == nil || !c.cfg.ShareStore.Supported() {
		return nil, c.fail(ErrShareConfigUnsupported)
	}
	return c.cfg.ShareStore, nil
}

var shareConfigDocs = map[string]string{
	sharegroup.KeyKeyOrdering:          "Per-key ordering: the records of one key are never in flight to two members at once and are delivered in offset order.",
	sharegroup.KeyDeadLetterCopyRecord: "Whether a dead letter carries the record's key and value; false: only the headers naming the record (source topic, partition, offset, group, delivery count, reason).",
	sharegroup.KeyDeadLetterTopic:      "The topic the group's dead letters (rejected records, records past the delivery limit) are written to; empty: none.",
	sharegroup.KeyRecordLockDuration:   "How long an acquired record stays locked to its member, in ms.",
	sharegroup.KeyDeliveryCountLimit:   "How many times a record is delivered before it is archived as a dead letter.",
	sharegroup.KeyAutoOffsetReset:      "Where a share-partition with no saved state starts: earliest, latest or by_duration:<ISO-8601 duration>.",
	sharegroup.KeyIsolationLevel:       "Which records the group reads: read_uncommitted (every record below the high watermark) or read_committed (below the last stable offset, aborted transactions' records left out).",
	sharegroup.KeyMaxRecordLocks:       "The most records one share-partition of the group keeps in flight (its window from the start offset).",
	sharegroup.KeyMaxInFlightPerKey:    "With share.key.ordering, the most records of one key one member holds at once (a positive count; the node's value, 0 for no bound, when not set).",
}

// DescribeShareGroupConfigs is every key of a share group's settings:
// its own value (SourceGroup) or the node's (SourceBroker).
// DescribeConfigs on the group. A group with no settings and no state
// answers the node's values, as Kafka does.
func (c *Core) DescribeShareGroupConfigs(ctx context.Context, groupID string) ([]ConfigEntry, error) {
	sc, err := c.shares(groupID)
	if err != nil {
		return nil, err
	}
	if err := c.authorizeGroup(ctx, auth.OpDescribeConfigs, groupID, "", nil); err != nil {
		return nil, err
	}
	var own map[string]string
	if c.cfg.ShareStore != nil {
		own = c.cfg.ShareStore.ShareGroupConfig(groupID)
	}
	def := sc.DefaultGroupConfig()
	cfg, err := sharegroup.ApplyGroupConfigs(def, own)
	if err != nil {
		cfg = def
	}
	out := make([]ConfigEntry, 0, len(sharegroup.GroupConfigKeys))
	for _, k := range sharegroup.GroupConfigKeys {
		e := ConfigEntry{Name: k, Value: sharegroup.GroupConfigValue(cfg, k), Source: SourceBroker, Documentation: shareConfigDocs[k]}
		if _, ok := own[k]; ok {
			e.Source = SourceGroup
			e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: k, Value: e.Value, Source: SourceGroup})
		}
		e.Synonyms = append(e.Synonyms, ConfigSynonym{Name: k, Value: sharegroup.GroupConfigValue(def, k), Source: SourceBroker})
		out = append(out, e)
	}
	return out, nil
}

// AlterShareGroupConfigsRequest sets and deletes keys of a share group's
// settings; the keys not named keep their values.
type AlterShareGroupConfigsRequest struct {
	Group        string
	Set          map[string]string
	Delete       []string
	ValidateOnly bool
}

// AlterShareGroupConfigs changes a share group's settings in the
// metadata log: AlterConfigs on the group. An unknown key or a value out
// of range is ErrInvalidConfig (share.ErrInvalidConfig), naming it; a
// change of key ordering, the lock duration, the delivery limit,
// max.in.flight.per.key or share.partition.max.record.locks applies to
// the group's share-partitions at once, their records in flight
// released.
func (c *Core) AlterShareGroupConfigs(ctx context.Context, req *AlterShareGroupConfigsRequest) error {
	sc, err := c.shares(req.Group)
	if err != nil {
		return err
	}
	if err := c.authorizeGroup(ctx, auth.OpAlterConfigs, req.Group, "", nil); err != nil {
		return err
	}
	if len(req.Set) == 0 && len(req.Delete) == 0 {
		return c.fail(fmt.Errorf("%w: nothing to set or delete", replica.ErrInvalidRequest))
	}
	merged := map[string]string{}
	st, stErr := c.shareStore()
	if stErr == nil {
		maps.Copy(merged, st.ShareGroupConfig(req.Group))
	}
	for _, k := range req.Delete {
		if !slices.Contains(sharegroup.GroupConfigKeys, k) {
			return c.fail(fmt.Errorf("%w: share group %q: unknown share group config %q", share.ErrInvalidConfig, req.Group, k))
		}
		if _, ok := req.Set[k]; ok {
			return c.fail(fmt.Errorf("%w: share group %q: %q is both set and deleted", share.ErrInvalidConfig, req.Group, k))
		}
		delete(merged, k)
	}
	maps.Copy(merged, req.Set)
	if _, err := sharegroup.ApplyGroupConfigs(sc.DefaultGroupConfig(), merged); err != nil {
		return c.fail(fmt.Errorf("share group %q: %w", req.Group, err))
	}
	if t, ok := req.Set[sharegroup.KeyDeadLetterTopic]; ok && t != "" {
		if err := ValidateTopicName(t); err != nil {
			return c.fail(fmt.Errorf("%w: share group %q: %s=%q: %v", share.ErrInvalidConfig, req.Group, sharegroup.KeyDeadLetterTopic, t, err))
		}
		if !strings.HasPrefix(t, c.cfg.DeadLetterTopicPrefix) {
			return c.fail(fmt.Errorf("%w: share group %q: %s=%q must start with %q (the node's errors.deadletterqueue.topic.name.prefix)",
				share.ErrInvalidConfig, req.Group, sharegroup.KeyDeadLetterTopic, t, c.cfg.DeadLetterTopicPrefix))
		}
	}
	if stErr != nil {
		return stErr
	}
	if req.ValidateOnly {
		return nil
	}
	if maps.Equal(merged, st.ShareGroupConfig(req.Group)) {
		// Nothing changes: no new generation, which would refuse the
		// saves in flight (a client setting the same value at each
		// start).
		return nil
	}
	// The keys named only: another change of other keys, which this
	// node's image may not hold yet, is kept.
	if err := st.PutShareGroupConfig(ctx, req.Group, req.Set, req.Delete); err != nil {
		return c.fail(fmt.Errorf("alter configs of share group %q: %w", req.Group, err))
	}
	return nil
}

// shareGroupKnown says whether group is a share group: one with saved
// state or settings, or one this node serves.
func (c *Core) shareGroupKnown(groupID string) bool {
	if c.cfg.Shares == nil {
		return false
	}
	if c.cfg.ShareStore != nil && c.cfg.ShareStore.HasShareGroup(groupID) {
		return true
	}
	return c.cfg.Shares.Has(groupID)
}

// deleteShareGroup removes an empty share group's saved state and
// settings; one with members, on any node, is group.ErrNonEmptyGroup.
func (c *Core) deleteShareGroup(ctx context.Context, groupID string) error {
	sc := c.cfg.Shares
	if err := c.shareGroupEmpty(ctx, sc, groupID); err != nil {
		return err
	}
	if c.cfg.ShareStore != nil && c.cfg.ShareStore.HasShareGroup(groupID) {
		// Saved state the metadata log cannot delete below
		// metadata.version 16 is refused rather than kept behind a
		// success: the group would go on from it.
		st, err := c.shareStore()
		if err != nil {
			return err
		}
		if err := st.DeleteShareGroup(ctx, groupID, nil); err != nil {
			return c.fail(fmt.Errorf("delete share group %q: %w", groupID, err))
		}
	}
	sc.ForgetGroup(groupID)
	return nil
}

// ShareTopicResult is one topic's answer to DeleteShareGroupOffsets.
type ShareTopicResult struct {
	Topic string
	// Err is an *Error, or nil.
	Err error
}

// DeleteShareGroupOffsets removes an empty share group's saved state on
// the topics named (Kafka's DeleteShareGroupOffsets): Delete on the
// group, Read on the topics. Its members next read those topics from
// share.auto.offset.reset. A group neither saved nor served is
// ErrShareGroupNotFound, one with members group.ErrNonEmptyGroup; an
// unknown topic is refused in its result.
func (c *Core) DeleteShareGroupOffsets(ctx context.Context, groupID string, topics []string) ([]ShareTopicResult, error) {
	sc, err := c.shares(groupID)
	if err != nil {
		return nil, err
	}
	if err := c.authorizeGroup(ctx, auth.OpDelete, groupID, auth.OpRead, topics); err != nil {
		return nil, err
	}
	st, err := c.shareStore()
	if err != nil {
		return nil, err
	}
	if !c.shareGroupKnown(groupID) {
		return nil, c.fail(fmt.Errorf("%w: %q", ErrShareGroupNotFound, groupID))
	}
	if err := c.shareGroupEmpty(ctx, sc, groupID); err != nil {
		return nil, err
	}
	out := make([]ShareTopicResult, len(topics))
	var known []string
	for i, t := range topics {
		out[i].Topic = t
		if _, ok := c.cfg.Cluster.Topic(t); !ok {
			out[i].Err = c.fail(unknownTopic(t))
			continue
		}
		known = append(known, t)
	}
	if len(known) == 0 {
		return out, nil
	}
	if err := st.DeleteShareGroup(ctx, groupID, known); err != nil {
		return nil, c.fail(fmt.Errorf("delete share group %q's state on %v: %w", groupID, known, err))
	}
	return out, nil
}
