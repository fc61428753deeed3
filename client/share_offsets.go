package client

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// A share group's start offsets (Kafka's DescribeShareGroupOffsets and
// AlterShareGroupOffsets, kafka-share-groups.sh --describe --offsets and
// --reset-offsets): every record of a share-partition below its start
// offset is finished (accepted or archived).

// ShareGroupOffset is one share-partition's start offset, as
// DescribeShareGroupOffsets answers it or AlterShareGroupOffsets set it.
type ShareGroupOffset struct {
	Topic string `json:"topic"`
	// Partition is -1 for an unknown topic named with no partition.
	Partition int32 `json:"partition"`
	// StartOffset is -1 where the group has no state on the partition yet
	// (its next member starts there from share.auto.offset.reset); for an
	// alter, the offset set.
	StartOffset int64 `json:"start_offset"`
	// LeaderEpoch is the partition's leader epoch when the state was
	// saved; -1 when unknown.
	LeaderEpoch int32 `json:"leader_epoch"`
	// Lag counts the records below the high watermark not finished yet;
	// -1 when unknown (the partition's leader did not answer, or the
	// group has no state there; always for an alter).
	Lag int64 `json:"lag"`
	// Err is the partition's refusal (an *Error: an unknown topic or
	// partition, a topic not authorized, a negative offset, a partition
	// named twice); nil when answered or set.
	Err error `json:"-"`
}

// ShareOffset is the new start offset of one share-partition.
type ShareOffset struct {
	Topic     string
	Partition int32
	Offset    int64
}

// DescribeShareGroupOffsets answers the start offset and lag of a share
// group's share-partitions: of every partition of topics, or of every
// share-partition the group has when none is named (sorted by topic and
// partition; else in the order named, partitions ascending). A partition
// with no state yet has StartOffset -1; a topic or partition refused has
// its Err, the others are answered. A group neither saved nor served by
// any broker is GROUP_ID_NOT_FOUND.
//
// Saved states are known to every broker, but a share-partition not saved
// yet is known to its leader only, and only the leader knows the lag: so
// the leaders of the topics' partitions are asked (every broker when no
// topic is named) and each partition's answer taken from its leader where
// it gave one. When none of them can be reached, any broker is, with the
// retries of the other group calls; a partition whose leader did not
// answer then has Lag -1.
func (c *Client) DescribeShareGroupOffsets(ctx context.Context, group string, topics ...string) ([]ShareGroupOffset, error) {
	if err := ValidateGroupID(group); err != nil {
		return nil, err
	}
	topics = uniqueInOrder(topics)
	req := &quirev1.DescribeShareGroupOffsetsRequest{Group: group}
	for _, t := range topics {
		req.Topics = append(req.Topics, &quirev1.ShareOffsetsTopic{Topic: t})
	}
	answers := map[int32][]*quirev1.ShareGroupOffset{}
	targets := c.shareOffsetsBrokers(ctx, topics)
	var last error
	notFound := 0
	for _, b := range targets {
		var resp *quirev1.DescribeShareGroupOffsetsResponse
		err := c.onBroker(ctx, b.addr, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
			resp, err = quirev1.NewGroupsClient(cc).DescribeShareGroupOffsets(ctx, req)
			return err
		})
		if err == nil {
			answers[b.id] = resp.GetPartitions()
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch ErrorCode(err) {
		case quirev1.ErrorCode_GROUP_ID_NOT_FOUND:
			// A group only this broker's memory holds, or saved just now
			// and not yet in this broker's image: another may serve it.
			notFound++
			last = err
			continue
		case quirev1.ErrorCode_NETWORK_EXCEPTION, quirev1.ErrorCode_REQUEST_TIMED_OUT:
			last = err
			continue
		}
		return nil, err
	}
	if len(answers) == 0 {
		if len(targets) > 0 && notFound == len(targets) {
			return nil, last
		}
		// No leader known or reached: any broker answers every partition
		// (the lag of those it does not lead unknown).
		var resp *quirev1.DescribeShareGroupOffsetsResponse
		err := c.group(ctx, func(ctx context.Context, g quirev1.GroupsClient) (err error) {
			resp, err = g.DescribeShareGroupOffsets(ctx, req)
			return err
		})
		if err != nil {
			return nil, err
		}
		answers[-1] = resp.GetPartitions()
	}
	return c.mergeShareOffsets(answers, topics), nil
}

// shareOffsetsBrokers is whom DescribeShareGroupOffsets asks: the
// unfenced leaders of the topics' partitions, or every unfenced broker
// when no topic is named. It may be empty (nothing known of the topics):
// then any broker is asked.
func (c *Client) shareOffsetsBrokers(ctx context.Context, topics []string) []brokerMeta {
	stale := len(c.meta.brokerList()) == 0
	for _, t := range topics {
		if tm := c.meta.topic(t); tm == nil || tm.err != nil {
			stale = true
		}
	}
	if stale {
		// What it cannot learn is left to whichever broker answers.
		if err := c.meta.refresh(ctx, topics, false); err != nil {
			c.log.Debug("metadata refresh for share group offsets failed", "error", err)
		}
	}
	var out []brokerMeta
	if len(topics) == 0 {
		for _, b := range c.meta.brokerList() {
			if !b.fenced {
				out = append(out, b)
			}
		}
		return out
	}
	seen := map[int32]bool{}
	for _, t := range topics {
		tm := c.meta.topic(t)
		if tm == nil {
			continue
		}
		for _, p := range tm.partitions {
			if p.leader < 0 || seen[p.leader] {
				continue
			}
			seen[p.leader] = true
			if b, ok := c.meta.broker(p.leader); ok && !b.fenced {
				out = append(out, b)
			}
		}
	}
	slices.SortFunc(out, func(a, b brokerMeta) int { return cmp.Compare(a.id, b.id) })
	return out
}

// leaderOf is the leader of a partition in the client's metadata; -1
// when unknown.
func (c *Client) leaderOf(topic string, partition int32) int32 {
	tm := c.meta.topic(topic)
	if tm == nil || partition < 0 || int(partition) >= len(tm.partitions) {
		return -1
	}
	return tm.partitions[partition].leader
}

// mergeShareOffsets makes one answer of the brokers' (by broker id; -1
// for one whose id is not known): for each partition, an answer without
// error rather than a refusal, and its leader's rather than another's.
func (c *Client) mergeShareOffsets(answers map[int32][]*quirev1.ShareGroupOffset, topics []string) []ShareGroupOffset {
	type key struct {
		topic     string
		partition int32
	}
	type choice struct {
		o     ShareGroupOffset
		score int
	}
	best := map[key]choice{}
	for _, id := range slices.Sorted(maps.Keys(answers)) {
		for _, p := range answers[id] {
			o := ShareGroupOffset{Topic: p.GetTopic(), Partition: p.GetPartition(), StartOffset: p.GetStartOffset(),
				LeaderEpoch: p.GetLeaderEpoch(), Lag: p.GetLag(), Err: fromProto(p.GetError())}
			score := 0
			if o.Err == nil {
				score += 2
			}
			if id >= 0 && c.leaderOf(o.Topic, o.Partition) == id {
				score++
			}
			k := key{o.Topic, o.Partition}
			if cur, ok := best[k]; !ok || score > cur.score {
				best[k] = choice{o, score}
			}
		}
	}
	// A topic one broker did not know (a single refusal, partition -1)
	// that another answered by partition: the partitions' answers only.
	answered := map[string]bool{}
	for k, ch := range best {
		if k.partition >= 0 && ch.o.Err == nil {
			answered[k.topic] = true
		}
	}
	out := make([]ShareGroupOffset, 0, len(best))
	for k, ch := range best {
		if k.partition < 0 && answered[k.topic] {
			continue
		}
		out = append(out, ch.o)
	}
	order := map[string]int{}
	for i, t := range topics {
		order[t] = i
	}
	slices.SortFunc(out, func(a, b ShareGroupOffset) int {
		if len(topics) > 0 {
			if d := cmp.Compare(order[a.Topic], order[b.Topic]); d != 0 {
				return d
			}
		}
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// AlterShareGroupOffsets sets the start offsets of share-partitions of a
// share group with no members, as kafka-share-groups.sh --reset-offsets:
// each one starts anew at its offset, nothing in flight, its delivery
// counts gone (an offset past the log's end waits for the log to get
// there; one below the log start offset starts at the log start). A
// group never seen is made, its first member starting at the offsets
// set. It answers one result per offset, in the order given: a topic
// refused or unknown, a partition the topic does not have, a negative
// offset or a partition named twice has its Err, the others are set.
//
// Any broker takes it, retried as the other group calls. A group with
// members fails with NON_EMPTY_GROUP (errors.Is(err,
// &Error{Code: quirev1.ErrorCode_NON_EMPTY_GROUP})), a cluster below
// metadata.version 17 with UNSUPPORTED_VERSION. The broker answering
// holds the new offsets once it answers; the others, and so
// DescribeShareGroupOffsets asked of them, a moment later.
func (c *Client) AlterShareGroupOffsets(ctx context.Context, group string, offsets ...ShareOffset) ([]ShareGroupOffset, error) {
	if err := ValidateGroupID(group); err != nil {
		return nil, err
	}
	if len(offsets) == 0 {
		return nil, newError(quirev1.ErrorCode_INVALID_REQUEST, "alter share group offsets: no offsets")
	}
	req := &quirev1.AlterShareGroupOffsetsRequest{Group: group, Offsets: make([]*quirev1.ShareStartOffset, len(offsets))}
	for i, o := range offsets {
		req.Offsets[i] = &quirev1.ShareStartOffset{Topic: o.Topic, Partition: o.Partition, StartOffset: o.Offset}
	}
	var resp *quirev1.AlterShareGroupOffsetsResponse
	err := c.group(ctx, func(ctx context.Context, g quirev1.GroupsClient) (err error) {
		resp, err = g.AlterShareGroupOffsets(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]ShareGroupOffset, 0, len(resp.GetPartitions()))
	for _, p := range resp.GetPartitions() {
		out = append(out, ShareGroupOffset{Topic: p.GetTopic(), Partition: p.GetPartition(), StartOffset: p.GetStartOffset(),
			LeaderEpoch: p.GetLeaderEpoch(), Lag: p.GetLag(), Err: fromProto(p.GetError())})
	}
	return out, nil
}

// uniqueInOrder is s without repeats, in the order first named.
func uniqueInOrder(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
