package request

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
	"github.com/quirelog/quire/storage"
)

// Share groups (KIP-932 queues): the members of a share group all fetch
// from the same partitions and the broker hands each record to one of
// them at a time, locked until acknowledged. The share coordinator
// (sharegroup) keeps the members and each partition's in-flight records
// in memory on this node, which must lead the partitions fetched, and
// saves each share-partition's state through its Store (the metadata
// log) for the next leader: see docs/share-groups.md. The core authorizes
// each call (Read on the group, Read on the topics fetched), reads the
// logs for the coordinator, has it save what a call changed before
// answering (an acknowledgement is answered, a record handed out, only
// once saved), and then writes the dead letters.

// DefaultShareMaxRecords is how many records a ShareFetch acquires when
// it does not say.
const DefaultShareMaxRecords = 500

// The share-partition's types, as the doors use them.
type (
	// ShareAck acknowledges a range of records a member holds.
	ShareAck = share.Ack
	// ShareAckType is accept, release, reject or renew (Kafka's numbers).
	ShareAckType = share.AckType
	// ShareAcquiredRange is a run of records acquired, with its delivery
	// count.
	ShareAcquiredRange = share.AcquiredRange
)

// The acknowledgement types.
const (
	ShareAccept  = share.Accept
	ShareRelease = share.Release
	ShareReject  = share.Reject
	ShareRenew   = share.Renew
)

// ErrShareGroupsDisabled: this node serves no share groups.
var ErrShareGroupsDisabled = errors.New("request: share groups are not enabled on this node")

// ShareHeartbeat is a ShareGroupHeartbeat: epoch 0 joins, -1 leaves.
// Topics is the subscription, nil when unchanged.
type ShareHeartbeat struct {
	Group    string
	MemberID string
	Epoch    int32
	Topics   []string
}

// ShareHeartbeatResult is the member's id and epoch, the interval to
// heartbeat at, and its assignment: every partition of the topics it
// subscribes to that exist.
type ShareHeartbeatResult struct {
	MemberID   string
	Epoch      int32
	Interval   time.Duration
	Assignment GroupAssignment
}

// SharePartition names a partition of a share fetch or acknowledgement,
// with the acknowledgements of records the member holds there.
type SharePartition struct {
	Topic     string
	Partition int32
	Acks      []share.Ack
}

// ShareFetchRequest acknowledges what each partition carries, then
// acquires up to MaxRecords records over all the partitions, waiting up
// to MaxWait for one.
type ShareFetchRequest struct {
	Group      string
	MemberID   string
	MaxWait    time.Duration
	MaxRecords int
	Partitions []SharePartition
	// Route passes the partitions led elsewhere on to their leaders (a
	// SHARED Subscribe stream's fetch; share_members.go), rather than
	// answering them NOT_LEADER_OR_FOLLOWER.
	Route bool
	// KeyOrdered: the member asks for the group's per-key ordering (a
	// key_ordered SHARED stream): a node serving the group without it
	// refuses the fetch (shareKeyOrderedCall) rather than deliver out
	// of order; below metadata.version 16, where a group's settings are
	// per node, it turns the ordering on first.
	KeyOrdered bool

	early <-chan struct{} // closed: stop long-polling (a routed fetch's part)
}

// ShareFetchResult is one partition's answer: the log's batches holding
// the acquired records (they may hold others too, which the client
// skips), and the acquired ranges.
type ShareFetchResult struct {
	Topic     string
	Partition int32
	Records   []byte
	Acquired  []share.AcquiredRange
	// AckErr is the acknowledgements' refusal; Err the fetch's. Each an
	// *Error, or nil.
	AckErr error
	Err    error
}

// ShareAckResult is one partition's answer to ShareAcknowledge.
type ShareAckResult struct {
	Topic     string
	Partition int32
	Err       error
}

// DeadLetterHeaders name what a dead letter's headers carry: Kafka's
// (KIP-1191), so that tools written for Kafka's dead letters read them.
const (
	DeadLetterHeaderTopic     = "__dlq.errors.topic"
	DeadLetterHeaderPartition = "__dlq.errors.partition"
	DeadLetterHeaderOffset    = "__dlq.errors.offset"
	DeadLetterHeaderGroup     = "__dlq.errors.group"
	DeadLetterHeaderCount     = "__dlq.errors.delivery.count"
	DeadLetterHeaderReason    = "__dlq.errors.message"
)

// DeadLetterMessage is a dead letter's DeadLetterHeaderReason, Kafka's
// words for why the record was given up.
func DeadLetterMessage(r share.Reason) string {
	switch r {
	case share.ReasonRejected:
		return "Offset rejected by client."
	case share.ReasonDeliveryLimit:
		return "Offset delivery count exceeded the threshold."
	}
	return r.String()
}

// shares is the share coordinator, with group checked: a share group's
// id obeys a consumer group's rules, since its state is saved in the
// metadata log under it.
func (c *Core) shares(group string) (*sharegroup.Coordinator, error) {
	if c.cfg.Shares == nil {
		return nil, c.fail(ErrShareGroupsDisabled)
	}
	if err := metadata.ValidateGroupID(group); err != nil {
		return nil, c.fail(err)
	}
	return c.cfg.Shares, nil
}

// describedShareGroup is the share coordinator for a call describing
// group: Describe on the group, which must exist.
func (c *Core) describedShareGroup(ctx context.Context, group string) (*sharegroup.Coordinator, error) {
	sc, err := c.shares(group)
	if err != nil {
		return nil, err
	}
	if err := c.authorizeGroup(ctx, auth.OpDescribe, group, "", nil); err != nil {
		return nil, err
	}
	if !c.shareGroupKnown(group) {
		return nil, c.fail(fmt.Errorf("%w: %q", ErrShareGroupNotFound, group))
	}
	return sc, nil
}

// ShareLockDuration is the record lock duration of group's
// share-partitions; 0 when share groups are off.
func (c *Core) ShareLockDuration(group string) time.Duration {
	if c.cfg.Shares == nil {
		return 0
	}
	return c.cfg.Shares.GroupConfig(group).Partition.RecordLockDuration
}

// ShareGroupHeartbeat admits, keeps or removes a member: Read on the
// group, Describe on the topics it subscribes to.
func (c *Core) ShareGroupHeartbeat(ctx context.Context, hb *ShareHeartbeat) (*ShareHeartbeatResult, error) {
	sc, err := c.shares(hb.Group)
	if err != nil {
		return nil, err
	}
	if err := c.authorizeGroup(ctx, auth.OpRead, hb.Group, auth.OpDescribe, hb.Topics); err != nil {
		return nil, err
	}
	r, err := sc.Heartbeat(c.cfg.Now(), sharegroup.Heartbeat{Group: hb.Group, MemberID: hb.MemberID, Epoch: hb.Epoch, Topics: hb.Topics})
	// Who left (this member, or others found silent): released on the
	// other nodes before the answer.
	c.shareTellDepartures(ctx, sc.TakeDepartures())
	if err != nil {
		return nil, c.fail(err)
	}
	out := &ShareHeartbeatResult{MemberID: r.MemberID, Epoch: r.Epoch, Interval: r.Interval}
	for _, name := range r.Topics {
		t, ok := c.cfg.Cluster.Topic(name)
		if !ok || len(t.Partitions) == 0 {
			continue
		}
		tp := GroupTopicPartitions{Topic: name}
		for _, p := range t.Partitions {
			tp.Partitions = append(tp.Partitions, p.Partition)
		}
		out.Assignment.Topics = append(out.Assignment.Topics, tp)
	}
	return out, nil
}

func (c *Core) authorizeShare(ctx context.Context, group string, parts []SharePartition) error {
	return c.authorizeGroup(ctx, auth.OpRead, group, auth.OpRead, topicsOf(parts))
}

func topicsOf(parts []SharePartition) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = p.Topic
	}
	return out
}

// ShareAcknowledge applies a member's acknowledgements, each partition's
// refusal in its result.
func (c *Core) ShareAcknowledge(ctx context.Context, group, member string, parts []SharePartition) ([]ShareAckResult, error) {
	return c.shareAcknowledge(ctx, group, member, false, parts)
}

// ShareAcknowledgeKeyOrdered is ShareAcknowledge of a member that asks
// for the group's per-key ordering (a key_ordered SHARED stream's, passed
// on by its node): as a fetch of it is (shareKeyOrderedCall), it is
// refused where the group is served without the ordering; below
// metadata.version 16 it turns the ordering on here first, before a
// partition's state restored for the acknowledgement would serve the
// group without it.
func (c *Core) ShareAcknowledgeKeyOrdered(ctx context.Context, group, member string, parts []SharePartition) ([]ShareAckResult, error) {
	return c.shareAcknowledge(ctx, group, member, true, parts)
}

func (c *Core) shareAcknowledge(ctx context.Context, group, member string, keyOrdered bool, parts []SharePartition) ([]ShareAckResult, error) {
	sc, err := c.shares(group)
	if err != nil {
		return nil, err
	}
	if err := c.authorizeShare(ctx, group, parts); err != nil {
		return nil, err
	}
	if err := c.shareMember(ctx, sc, group, member); err != nil {
		return nil, err
	}
	if keyOrdered && !sc.GroupConfig(group).Partition.KeyOrdering {
		if err := c.shareKeyOrderedCall(ctx, sc, group); err != nil {
			return nil, err
		}
	}
	out := make([]ShareAckResult, len(parts))
	changes := make([]shareChange, len(parts))
	mark := sc.MarkGroup(group)
	for i, p := range parts {
		out[i] = ShareAckResult{Topic: p.Topic, Partition: p.Partition, Err: c.shareAck(ctx, sc, group, member, p, &changes[i])}
	}
	for i, err := range c.sharePersist(ctx, sc, group, parts, changes, mark) {
		if err != nil && out[i].Err == nil && len(parts[i].Acks) > 0 {
			out[i].Err = err
		}
	}
	return out, nil
}

// ShareRelease releases the records member holds on parts here (their
// acknowledgements ignored), at once, for the group's other members:
// the door's share session of the member on this node closed, by the
// client or with its connection, so nothing handed out in it will be
// acknowledged. The member stays in the group. The release is saved, as
// any change is, before it returns, so that a next leader does not
// restore the records as acquired by a member that let go; then the
// dead letters it made (records released past the delivery limit) are
// written. It answers the partitions whose release was not saved (nil
// when all were, or held nothing). It is not authorized again: it only
// gives back what the session's authorized fetches took.
func (c *Core) ShareRelease(ctx context.Context, group, member string, parts []SharePartition) error {
	sc, err := c.shares(group)
	if err != nil {
		return err
	}
	tps := make([]sharegroup.TopicPartition, len(parts))
	for i, p := range parts {
		tps[i] = sharegroup.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	changes := make([]shareChange, len(parts))
	mark := sc.MarkGroup(group)
	dead, errs := sc.Release(c.cfg.Now(), group, member, tps)
	for i := range parts {
		if len(dead[i]) == 0 {
			continue
		}
		changes[i].dead = dead[i]
		if part, err := c.leaderPartition(ctx, parts[i].Topic, parts[i].Partition, false); err == nil {
			changes[i].part = part
		}
	}
	var failed []error
	for i, err := range c.sharePersist(ctx, sc, group, parts, changes, mark) {
		if err == nil {
			err = errs[i]
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("%s-%d: %w", parts[i].Topic, parts[i].Partition, err))
		}
	}
	return errors.Join(failed...)
}

// shareChange is what a call did to one share-partition: the leader
// replica it read, and the dead letters to write once saved.
type shareChange struct {
	part *replica.Partition
	dead []share.DeadLetter
}

func (c *Core) shareAck(ctx context.Context, sc *sharegroup.Coordinator, group, member string, p SharePartition, ch *shareChange) error {
	if len(p.Acks) == 0 {
		return nil
	}
	part, err := c.leaderPartition(ctx, p.Topic, p.Partition, false)
	if err != nil {
		return c.fail(err)
	}
	ch.part = part
	dead, err := sc.Acknowledge(c.cfg.Now(), group, member, sharegroup.TopicPartition{Topic: p.Topic, Partition: p.Partition}, p.Acks)
	if err == nil {
		c.shareStats.onAcked(p.Acks)
	}
	ch.dead = append(ch.dead, dead...)
	return c.fail(err)
}

// sharePersist has the coordinator save the share-partitions the call
// changed since mark, then writes the dead letters of those saved, and
// answers each partition's saving error (one dropped meanwhile, its
// group's state deleted, is not saved).
func (c *Core) sharePersist(ctx context.Context, sc *sharegroup.Coordinator, group string, parts []SharePartition, changes []shareChange, mark sharegroup.Mark) []error {
	tps := make([]sharegroup.TopicPartition, len(parts))
	for i, p := range parts {
		tps[i] = sharegroup.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	}
	errs := sc.PersistSince(ctx, group, tps, mark)
	for i, err := range errs {
		if err != nil {
			errs[i] = c.fail(err)
			continue
		}
		ch := changes[i]
		if len(ch.dead) > 0 {
			c.shareStats.onDead(len(ch.dead))
		}
		if ch.part != nil {
			c.writeDeadLetters(ctx, sc, group, parts[i].Topic, parts[i].Partition, ch.part)
		}
	}
	return errs
}

// ShareFetch acknowledges, then acquires records for the member, the
// partitions in the request's order, long-polling up to MaxWait while none
// is there to acquire.
func (c *Core) ShareFetch(ctx context.Context, req *ShareFetchRequest) ([]ShareFetchResult, error) {
	if req.Route && c.cfg.ShareCluster != nil {
		return c.shareFetchRouted(ctx, req)
	}
	sc, err := c.shares(req.Group)
	if err != nil {
		return nil, err
	}
	if len(req.Partitions) == 0 {
		return nil, c.fail(fmt.Errorf("%w: no partitions", replica.ErrInvalidRequest))
	}
	if req.MaxWait < 0 || req.MaxRecords < 0 {
		return nil, c.fail(fmt.Errorf("%w: max wait %v and max records %d must not be negative", replica.ErrInvalidRequest, req.MaxWait, req.MaxRecords))
	}
	if err := c.authorizeShare(ctx, req.Group, req.Partitions); err != nil {
		return nil, err
	}
	if err := c.shareMember(ctx, sc, req.Group, req.MemberID); err != nil {
		return nil, err
	}
	if req.KeyOrdered && !sc.GroupConfig(req.Group).Partition.KeyOrdering {
		if err := c.shareKeyOrderedCall(ctx, sc, req.Group); err != nil {
			return nil, err
		}
	}
	maxRecords := req.MaxRecords
	if maxRecords == 0 {
		maxRecords = DefaultShareMaxRecords
	}
	out := make([]ShareFetchResult, len(req.Partitions))
	changes := make([]shareChange, len(req.Partitions))
	mark := sc.MarkGroup(req.Group)
	for i, p := range req.Partitions {
		out[i] = ShareFetchResult{Topic: p.Topic, Partition: p.Partition, AckErr: c.shareAck(ctx, sc, req.Group, req.MemberID, p, &changes[i])}
	}
	defer func() {
		// Answer only what is saved: an acknowledgement not saved is
		// refused, records whose delivery is not saved are not handed
		// out (they stay locked here until their lock runs out; with
		// per-key ordering their keys' later records wait for them).
		for i, err := range c.sharePersist(ctx, sc, req.Group, req.Partitions, changes, mark) {
			if err == nil {
				continue
			}
			if out[i].AckErr == nil && len(req.Partitions[i].Acks) > 0 {
				out[i].AckErr = err
			}
			if len(out[i].Acquired) > 0 {
				out[i].Records, out[i].Acquired, out[i].Err = nil, nil, err
			}
		}
	}()
	wake := make(chan struct{}, 1)
	var watched []*replica.Partition
	defer func() {
		for _, p := range watched {
			p.Unwatch(wake)
		}
	}()
	maxWait := min(req.MaxWait, maxFetchWait)
	deadline := time.Now().Add(maxWait)
	for first := true; ; first = false {
		got := c.shareAcquire(ctx, sc, req, out, changes, maxRecords, first, &watched, wake)
		if got > 0 || maxWait == 0 || !time.Now().Before(deadline) {
			return out, nil
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-wake:
		case <-req.early:
			t.Stop()
			return out, nil
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return out, nil
		}
		t.Stop()
	}
}

// shareAcquire makes one pass over the partitions and returns how many
// records it acquired.
func (c *Core) shareAcquire(ctx context.Context, sc *sharegroup.Coordinator, req *ShareFetchRequest, out []ShareFetchResult, changes []shareChange, maxRecords int, register bool, watched *[]*replica.Partition, wake chan struct{}) int {
	total := 0
	committed := sc.GroupConfig(req.Group).ReadCommitted // once a pass, not per partition
	for i, p := range req.Partitions {
		r := &out[i]
		r.Err = nil
		part, err := c.leaderPartition(ctx, p.Topic, p.Partition, false)
		if err != nil {
			r.Err = c.fail(err)
			continue
		}
		if register {
			part.Watch(wake)
			*watched = append(*watched, part)
		}
		if total >= maxRecords {
			continue
		}
		tp := sharegroup.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		f, err := sc.Acquire(c.cfg.Now(), req.Group, req.MemberID, tp, maxRecords-total, shareLog{p: part, committed: committed})
		changes[i].part = part
		changes[i].dead = append(changes[i].dead, f.DeadLetters...)
		if err != nil {
			r.Err = c.fail(err)
			continue
		}
		if len(f.Acquired) == 0 {
			continue
		}
		c.shareStats.onAcquired(f.Acquired)
		recs, err := readRange(part, f.Acquired[0].First, f.Acquired[len(f.Acquired)-1].Last)
		if err != nil {
			// The records stay acquired; their locks run out.
			r.Err = c.fail(err)
			continue
		}
		r.Records, r.Acquired = recs, f.Acquired
		for _, a := range f.Acquired {
			total += int(a.Last - a.First + 1)
		}
	}
	return total
}

// shareReadBytes is how much of a log one read takes.
const shareReadBytes = 1 << 20

// readRange returns the batches holding offsets first to last, and no
// batch past last: a read takes up to shareReadBytes of the log, which
// the client would otherwise decode only to skip.
func readRange(part *replica.Partition, first, last int64) ([]byte, error) {
	var out []byte
	for off := first; off <= last; {
		res, _, err := part.Read(off, shareReadBytes)
		if err != nil {
			return nil, err
		}
		if res.HighOffset <= off {
			return nil, fmt.Errorf("%w: offset %d is no longer readable", replica.ErrInvalidRequest, off)
		}
		next := off
		_ = record.WalkRead(res.Batches, func(batch []byte, h record.Header) error {
			if h.BaseOffset > last {
				return errPastRange
			}
			out = append(out, batch...)
			next = h.NextOffset()
			return nil
		})
		if next <= off {
			// No whole batch at off in the read: answer it as read.
			out = append(out, res.Batches...)
			next = res.HighOffset
		}
		off = next
	}
	return out, nil
}

// errPastRange stops readRange's walk at the first batch past its range.
var errPastRange = errors.New("past the range")

// shareLog is a leader replica as the share coordinator reads it: the
// records' offsets and keys, control batches left out (as gaps). A
// committed one (share.isolation.level read_committed) ends at the last
// stable offset and leaves the batches of aborted transactions out too.
type shareLog struct {
	p         *replica.Partition
	committed bool
}

func (l shareLog) Bounds() (int64, int64, error) {
	if l.committed {
		return l.p.LogStartOffset(), l.p.LastStableOffset(), nil
	}
	return l.p.LogStartOffset(), l.p.HighWatermark(), nil
}

// OffsetForTime is the first offset whose record's timestamp is at or
// after t, the high watermark when none is (sharegroup.TimeLog).
func (l shareLog) OffsetForTime(t time.Time) (int64, error) {
	off, _, ok, err := l.p.OffsetForTimestamp(t.UnixMilli())
	if err != nil {
		return 0, err
	}
	if !ok {
		return l.p.HighWatermark(), nil
	}
	return off, nil
}

func (l shareLog) Read(offset int64, maxRecords int) ([]share.Record, int64, error) {
	var res storage.ReadResult
	var aborted *record.AbortFilter
	var err error
	if l.committed {
		var txns []storage.AbortedTxn
		res, _, _, txns, err = l.p.ReadCommittedAppend(nil, offset, shareReadBytes)
		if len(txns) > 0 {
			at := make([]record.AbortedTxn, len(txns))
			for i, a := range txns {
				at[i] = record.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
			}
			aborted = record.NewAbortFilter(at)
		}
	} else {
		res, _, err = l.p.Read(offset, shareReadBytes)
	}
	if err != nil {
		return nil, offset, err
	}
	var recs []share.Record
	next := offset
	full := errors.New("full")
	err = record.WalkRead(res.Batches, func(batch []byte, h record.Header) error {
		// The filter sees every batch, markers included: a marker ends
		// its producer's aborted transaction.
		if (aborted != nil && aborted.Skip(&h)) || h.Control() {
			next = max(next, h.NextOffset())
			return nil
		}
		err := record.ForEachRecord(batch, func(r *record.Record) error {
			if r.Offset < offset {
				return nil
			}
			if len(recs) == maxRecords {
				return full
			}
			s := share.Record{Offset: r.Offset}
			if r.Key != nil {
				s.Key = append([]byte{}, r.Key...)
			}
			recs = append(recs, s)
			next = r.Offset + 1
			return nil
		})
		if err != nil {
			return err
		}
		next = max(next, h.NextOffset())
		return nil
	})
	if err != nil && !errors.Is(err, full) {
		return nil, offset, err
	}
	return recs, next, nil
}
