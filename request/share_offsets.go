package request

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/share"
)

// A share group's start offsets (Kafka's DescribeShareGroupOffsets and
// AlterShareGroupOffsets): every record of a share-partition below its
// start offset is finished. They are read from the share-partitions'
// saved states (the metadata log, which a leader writes before it
// answers a change), or from this node's memory for a share-partition
// it holds and has not saved; an alter writes new states starting at
// the offsets given, in one metadata log entry (metadata.version 17).

// ErrShareOffsetsUnsupported: setting a share group's start offsets
// needs metadata.version 17, or this node keeps no share group state in
// the metadata log.
var ErrShareOffsetsUnsupported = errors.New("request: setting share group start offsets needs metadata.version 17 on every node")

// ShareStartOffset is one share-partition's start offset: a saved state
// (ShareGroupStore.ShareStarts) or an offset to set
// (AlterShareGroupOffsets, which reads Topic, Partition and StartOffset
// only).
type ShareStartOffset struct {
	Topic       string
	Partition   int32
	StartOffset int64
	// LeaderEpoch is the leader epoch the state was saved under.
	LeaderEpoch int32
	// Finished counts the records at or past StartOffset already
	// finished (accepted or archived, out of order).
	Finished int64
	// DeadLettered counts the records archived as dead letters, as
	// saved with the state (read only).
	DeadLettered int64
}

// ShareOffsetTopic names partitions of a topic; no partitions: all of
// them.
type ShareOffsetTopic struct {
	Topic      string
	Partitions []int32
}

// ShareOffset is one share-partition's answer to
// DescribeShareGroupOffsets or AlterShareGroupOffsets.
type ShareOffset struct {
	Topic     string
	Partition int32
	// StartOffset is -1 for a share-partition with no state yet (the
	// group starts it from share.auto.offset.reset); for an alter, the
	// offset set.
	StartOffset int64
	// LeaderEpoch is that of the partition when the state was saved; -1
	// when unknown.
	LeaderEpoch int32
	// Lag counts the records below the high watermark not finished yet,
	// the high watermark asked of the partition's leader wherever it
	// is; -1 with no state, or when the leader could not be asked.
	Lag int64
	// Err is an *Error, or nil.
	Err error
}

// DescribeShareGroupOffsets answers the start offset of a share group's
// share-partitions: Describe on the group, and on each topic (a topic
// refused, unknown or with no such partition is refused in its
// results). With no topics, every share-partition the group has a state
// of (those on topics the caller may not describe left out). A group
// neither saved nor served is ErrShareGroupNotFound.
func (c *Core) DescribeShareGroupOffsets(ctx context.Context, group string, topics []ShareOffsetTopic) ([]ShareOffset, error) {
	sc, err := c.describedShareGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	known := map[shareTP]ShareStartOffset{}
	if st := c.cfg.ShareStore; st != nil {
		for _, s := range st.ShareStarts(group) {
			known[shareTP{s.Topic, s.Partition}] = s
		}
	}
	_, held := sc.Describe(group)
	for _, p := range held {
		tp := shareTP{p.Topic, p.Partition}
		if _, ok := known[tp]; ok {
			continue
		}
		s := ShareStartOffset{Topic: p.Topic, Partition: p.Partition, StartOffset: p.Start, LeaderEpoch: -1}
		for _, r := range p.Records {
			if r.State == share.Acknowledged || r.State == share.Archived {
				s.Finished++
			}
		}
		if t, ok := c.cfg.Cluster.Topic(p.Topic); ok && int(p.Partition) < len(t.Partitions) {
			s.LeaderEpoch = t.Partitions[p.Partition].LeaderEpoch
		}
		known[tp] = s
	}
	if topics == nil {
		byTopic := map[string]*ShareOffsetTopic{}
		for tp := range known {
			if !c.mayDescribe(ctx, tp.topic) {
				continue
			}
			t := byTopic[tp.topic]
			if t == nil {
				t = &ShareOffsetTopic{Topic: tp.topic}
				byTopic[tp.topic] = t
			}
			t.Partitions = append(t.Partitions, tp.partition)
		}
		for _, t := range byTopic {
			slices.Sort(t.Partitions)
			topics = append(topics, *t)
		}
		slices.SortFunc(topics, func(a, b ShareOffsetTopic) int { return strings.Compare(a.Topic, b.Topic) })
	}
	var out []ShareOffset
	var lags []shareLag
	for _, t := range topics {
		info, exists := c.cfg.Cluster.Topic(t.Topic)
		parts := t.Partitions
		if len(parts) == 0 && exists {
			for i := range info.Partitions {
				parts = append(parts, int32(i))
			}
		}
		topicErr := c.authorize(ctx, auth.OpDescribe, auth.ResourceTopic, t.Topic, false)
		if topicErr == nil && !exists {
			topicErr = c.fail(unknownTopic(t.Topic))
		}
		if len(parts) == 0 && topicErr != nil {
			// An unknown topic with no partitions named: one result.
			out = append(out, ShareOffset{Topic: t.Topic, Partition: -1, StartOffset: -1, LeaderEpoch: -1, Lag: -1, Err: topicErr})
			continue
		}
		for _, p := range parts {
			r := ShareOffset{Topic: t.Topic, Partition: p, StartOffset: -1, LeaderEpoch: -1, Lag: -1, Err: topicErr}
			if r.Err == nil && (p < 0 || int(p) >= len(info.Partitions)) {
				r.Err = c.fail(fmt.Errorf("%w: partition %d of topic %q (it has %d)", replica.ErrUnknownTopicOrPartition, p, t.Topic, len(info.Partitions)))
			}
			if s, ok := known[shareTP{t.Topic, p}]; ok && r.Err == nil {
				r.StartOffset, r.LeaderEpoch = s.StartOffset, s.LeaderEpoch
				lags = append(lags, shareLag{at: len(out), start: s.StartOffset, finished: s.Finished})
			}
			out = append(out, r)
		}
	}
	c.shareLags(ctx, out, lags)
	return out, nil
}

// shareLag is a result whose lag is to be found: its share-partition's
// start offset and the records finished past it.
type shareLag struct {
	at              int
	start, finished int64
}

// shareLagAsks bounds the partitions' leaders asked at once for their
// high watermarks (shareLags).
const shareLagAsks = 16

// shareLags fills in the lag of each result lags names: the records
// below the partition's high watermark, asked of its leader wherever
// it is, not finished yet; it stays -1 where the leader cannot be asked
// (none, or not answering).
func (c *Core) shareLags(ctx context.Context, out []ShareOffset, lags []shareLag) {
	sem := make(chan struct{}, shareLagAsks)
	var wg sync.WaitGroup
	for _, l := range lags {
		r := &out[l.at]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			hw := c.listOffsetAnywhere(ctx, ListOffsetsPartition{Topic: r.Topic, Partition: r.Partition, Timestamp: LatestTimestamp})
			if hw.Err == nil && hw.Offset >= 0 {
				r.Lag = max(0, hw.Offset-l.start-l.finished)
			}
		})
	}
	wg.Wait()
}

// AlterShareGroupOffsets sets the start offset of share-partitions of a
// share group with no members (Kafka's AlterShareGroupOffsets, which
// kafka-share-groups.sh --reset-offsets sends): each one's state is
// replaced by a new one starting there, with nothing in flight, its
// delivery counts and pending dead letters gone. Read on the group, and
// on each topic. A group with members is group.ErrNonEmptyGroup; a topic
// refused or unknown, a partition it does not have, a negative offset or
// a partition named twice is refused in its result, the others set. A
// group never seen is made (its first member starts at the offsets set).
// Below metadata.version 17 it is ErrShareOffsetsUnsupported.
func (c *Core) AlterShareGroupOffsets(ctx context.Context, group string, offsets []ShareStartOffset) ([]ShareOffset, error) {
	sc, err := c.shares(group)
	if err != nil {
		return nil, err
	}
	if err := c.authorizeGroup(ctx, auth.OpRead, group, "", nil); err != nil {
		return nil, err
	}
	st := c.cfg.ShareStore
	if st == nil || !st.OffsetsSupported() {
		return nil, c.fail(ErrShareOffsetsUnsupported)
	}
	if err := c.shareGroupEmpty(ctx, sc, group); err != nil {
		return nil, err
	}
	out := make([]ShareOffset, len(offsets))
	var set []ShareStartOffset
	seen := map[shareTP]bool{}
	for i, o := range offsets {
		r := &out[i]
		*r = ShareOffset{Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset, LeaderEpoch: -1, Lag: -1}
		if err := c.authorize(ctx, auth.OpRead, auth.ResourceTopic, o.Topic, false); err != nil {
			r.Err = err
			continue
		}
		t, ok := c.cfg.Cluster.Topic(o.Topic)
		switch tp := (shareTP{o.Topic, o.Partition}); {
		case !ok:
			r.Err = c.fail(unknownTopic(o.Topic))
		case o.Partition < 0 || int(o.Partition) >= len(t.Partitions):
			r.Err = c.fail(fmt.Errorf("%w: partition %d of topic %q (it has %d)", replica.ErrUnknownTopicOrPartition, o.Partition, o.Topic, len(t.Partitions)))
		case o.StartOffset < 0:
			r.Err = c.fail(fmt.Errorf("%w: start offset %d of %s-%d is negative", replica.ErrInvalidRequest, o.StartOffset, o.Topic, o.Partition))
		case seen[tp]:
			r.Err = c.fail(fmt.Errorf("%w: %s-%d named twice", replica.ErrInvalidRequest, o.Topic, o.Partition))
		default:
			seen[tp] = true
			r.LeaderEpoch = t.Partitions[o.Partition].LeaderEpoch
			set = append(set, ShareStartOffset{Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset})
		}
	}
	if len(set) == 0 {
		return out, nil
	}
	if err := st.AlterShareGroupOffsets(ctx, group, set); err != nil {
		return nil, c.fail(fmt.Errorf("share group %q: setting start offsets: %w", group, err))
	}
	return out, nil
}
