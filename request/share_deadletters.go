package request

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/sharegroup"
)

// Dead letters, written exactly once. The share coordinator keeps each
// dead letter pending in the share-partition's saved state until it is
// known written (sharegroup/deadletters.go); the core writes those whose
// mark is saved, each to partition (source partition mod partitions) of
// the dead-letter topic, as Kafka does: a second attempt goes where the
// first went, and one source partition's dead letters stay in order. A
// dead letter is Kafka's (KIP-1191): headers naming the source topic,
// partition and offset, the group, the delivery count and why; the
// record's key and value only with the group's
// errors.deadletterqueue.copy.record.enable. A pending dead letter
// that a write may already have reached (restored by a next leader, or
// after a write whose answer was lost) is looked for first: the
// dead-letter partition is read from the first record written since
// shortly before the record was archived, and a record whose headers
// name the same group, source topic, partition and offset counts as
// written. A new leader's check cannot see a write a deposed leader
// still has in flight; see docs/share-groups.md.

// deadLetterSkew is how much earlier than a record's archiving the check
// starts to read: clocks of the node that archived it, the one that
// wrote it and the one checking differ by less.
const deadLetterSkew = time.Minute

// DeadLetterGroupEnable is the topic config (KIP-1191's) that lets a
// topic take share groups' dead letters: the topic's administrator,
// not a group's, decides that the node may write to it.
const DeadLetterGroupEnable = "errors.deadletterqueue.group.enable"

// writeDeadLetters writes the dead letters of group on topic-partition
// that are pending and saved, through part (the source partition's
// leader replica), as the node itself (KIP-1191: no member's ACLs
// apply; the guards are the topic's errors.deadletterqueue.group.enable
// and the node's name prefix, deadLetterTopic). A dead-letter
// topic that is missing or not usable keeps them pending.
func (c *Core) writeDeadLetters(ctx context.Context, sc *sharegroup.Coordinator, group, topic string, partition int32, part *replica.Partition) {
	tp := sharegroup.TopicPartition{Topic: topic, Partition: partition}
	dlq, letters := sc.ClaimDeadLetters(group, tp)
	if len(letters) == 0 {
		return
	}
	written := make([]bool, len(letters))
	partitions, ok := c.deadLetterTopic(ctx, dlq)
	if !ok {
		sc.FinishDeadLetters(group, tp, letters, written)
		return
	}
	copyRecord := sc.GroupConfig(group).DeadLetterCopyRecord
	c.sendDeadLetters(asNode(ctx), dlq, partitions, group, topic, partition, part, letters, written, copyRecord)
	sc.FinishDeadLetters(group, tp, letters, written)
	if slices.Contains(written, true) {
		// Saved now rather than with the next change, so that a next
		// leader need not look for them (one more entry in the
		// metadata log for each batch of dead letters, which are few).
		_ = sc.Persist(ctx, group, []sharegroup.TopicPartition{tp})
	}
}

// deadLetterTopic is dlq's partition count, and whether it can take dead
// letters: its name has the node's prefix, it exists, and it is enabled
// for groups' dead letters. One that does not exist is created first
// when the node may (errors.deadletterqueue.auto.create.topics.enable):
// with the node's num.partitions and default.replication.factor, and
// enabled; on a failure (the creator logs it) the dead letters stay
// pending.
func (c *Core) deadLetterTopic(ctx context.Context, dlq string) (partitions int32, ok bool) {
	if !strings.HasPrefix(dlq, c.cfg.DeadLetterTopicPrefix) {
		return 0, false
	}
	t, ok := c.cfg.Cluster.Topic(dlq)
	if !ok && c.cfg.DeadLetterCreator != nil {
		var err error
		t, err = c.cfg.DeadLetterCreator.CreateDeadLetterTopic(ctx, dlq, map[string]string{DeadLetterGroupEnable: "true"})
		ok = err == nil
	}
	on, _ := strconv.ParseBool(t.Configs[DeadLetterGroupEnable])
	return int32(len(t.Partitions)), ok && on
}

// sendDeadLetters writes letters to dlq, of n partitions, looking first
// for those that may have been written, and sets written[i] for each one
// known written (or dropped for good). copyRecord copies each record's
// key and value.
func (c *Core) sendDeadLetters(ctx context.Context, dlq string, n int32, group, topic string, partition int32, part *replica.Partition, letters []sharegroup.PendingDeadLetter, written []bool, copyRecord bool) {
	recs := make([]Record, len(letters))
	for i, d := range letters {
		recs[i] = Record{Headers: []record.RecordHeader{
			{Key: DeadLetterHeaderTopic, Value: []byte(topic)},
			{Key: DeadLetterHeaderPartition, Value: fmt.Appendf(nil, "%d", partition)},
			{Key: DeadLetterHeaderOffset, Value: fmt.Appendf(nil, "%d", d.Offset)},
			{Key: DeadLetterHeaderGroup, Value: []byte(group)},
			{Key: DeadLetterHeaderCount, Value: fmt.Appendf(nil, "%d", d.DeliveryCount)},
			{Key: DeadLetterHeaderReason, Value: []byte(DeadLetterMessage(d.Reason))},
		}}
		if copyRecord {
			recs[i].Key, recs[i].Value, _ = recordAt(part, d.Offset)
		}
		if n > 0 {
			recs[i].Partition, recs[i].HasPartition = partition%n, true
		}
	}
	// Look for the earlier writes of those that may have one, per
	// dead-letter partition, from the oldest archiving among them.
	since := map[int32]time.Time{}
	for i, d := range letters {
		if d.Check && n > 0 {
			p := recs[i].Partition
			if t, ok := since[p]; !ok || d.Archived.Before(t) {
				since[p] = d.Archived
			}
		}
	}
	var send []Record
	var at []int
	unknown := make([]bool, len(letters)) // the check failed: not sent now
	for p, t := range since {
		found, err := c.deadLettersFound(ctx, dlq, p, t.Add(-deadLetterSkew), group, topic, partition)
		for i, d := range letters {
			if !d.Check || recs[i].Partition != p {
				continue
			}
			if err != nil {
				unknown[i] = true // looked for again at the next attempt
				continue
			}
			written[i] = found[d.Offset]
		}
	}
	for i := range letters {
		if written[i] || unknown[i] {
			continue
		}
		send, at = append(send, recs[i]), append(at, i)
	}
	if len(send) == 0 {
		return
	}
	res, err := c.ProduceRecords(ctx, &ProduceRecordsRequest{Topic: dlq, Acks: -1, Records: send, ProducerID: -1, Route: true})
	if err != nil {
		if deadLetterPermanent(err) {
			// A lasting refusal (too large, an invalid topic name):
			// dropped, as the record stays archived.
			for _, i := range at {
				written[i] = true
			}
		}
		return
	}
	for j, r := range res {
		if r.Err == nil || deadLetterPermanent(r.Err) {
			written[at[j]] = true
		}
	}
}

// Kafka's codes of a write that will not succeed by retrying: the dead
// letter itself is refused. Any other failure, a missing dead-letter
// topic (UNKNOWN_TOPIC_OR_PARTITION, retriable in Kafka: it may be
// created) among them, keeps the dead letters pending, to be written by
// a later call (at most maxPendingDead per share-partition).
var deadLetterPermanentCodes = map[int32]bool{
	10: true, // MESSAGE_TOO_LARGE
	17: true, // INVALID_TOPIC_EXCEPTION
	87: true, // INVALID_RECORD
}

func deadLetterPermanent(err error) bool {
	var e *Error
	return errors.As(err, &e) && deadLetterPermanentCodes[e.Code]
}

// deadLettersFound reads partition p of dlq from the first record at or
// after since up to its high watermark and returns the source offsets of
// the dead letters of group on topic-partition it holds.
func (c *Core) deadLettersFound(ctx context.Context, dlq string, p int32, since time.Time, group, topic string, partition int32) (map[int64]bool, error) {
	lo := c.listOffsetAnywhere(ctx, ListOffsetsPartition{Topic: dlq, Partition: p, Timestamp: since.UnixMilli()})
	if lo.Err != nil {
		return nil, lo.Err
	}
	found := map[int64]bool{}
	if lo.Offset < 0 {
		return found, nil // nothing written since
	}
	want := strconv.Itoa(int(partition))
	for off := lo.Offset; ; {
		res := c.PollAnywhere(ctx, &FetchRequest{MaxBytes: shareReadBytes, Route: true,
			Partitions: []FetchPartition{{Topic: dlq, Partition: p, Offset: off, MaxBytes: shareReadBytes}}})
		r := res[0]
		if r.Err != nil {
			return nil, r.Err
		}
		if len(r.Records) == 0 {
			return found, nil
		}
		next := off
		err := record.WalkRead(r.Records, func(batch []byte, h record.Header) error {
			next = max(next, h.NextOffset())
			if h.Control() {
				return nil
			}
			return record.ForEachRecord(batch, func(rec *record.Record) error {
				var g, t, pt, o string
				for _, hd := range rec.Headers {
					switch hd.Key {
					case DeadLetterHeaderGroup:
						g = string(hd.Value)
					case DeadLetterHeaderTopic:
						t = string(hd.Value)
					case DeadLetterHeaderPartition:
						pt = string(hd.Value)
					case DeadLetterHeaderOffset:
						o = string(hd.Value)
					}
				}
				if g == group && t == topic && pt == want {
					if v, err := strconv.ParseInt(o, 10, 64); err == nil {
						found[v] = true
					}
				}
				return nil
			})
		})
		if err != nil {
			return nil, err
		}
		if next <= off || next >= r.HighWatermark {
			return found, nil
		}
		off = next
	}
}

// recordAt reads the key and value of the record at offset; false when
// the log no longer has it.
func recordAt(part *replica.Partition, offset int64) (key, value []byte, found bool) {
	res, _, err := part.Read(offset, shareReadBytes)
	if err != nil {
		return nil, nil, false
	}
	_ = record.WalkRead(res.Batches, func(batch []byte, _ record.Header) error {
		return record.ForEachRecord(batch, func(r *record.Record) error {
			if r.Offset == offset {
				if r.Key != nil {
					key = append([]byte{}, r.Key...)
				}
				if r.Value != nil {
					value = append([]byte{}, r.Value...)
				}
				found = true
			}
			return nil
		})
	})
	return key, value, found
}
