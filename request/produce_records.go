package request

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/partitioner"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
)

// Partitioner chooses the partition of a record with neither a partition
// nor a key (the broker's sticky partitioner).
type Partitioner interface {
	Partition(topic string, n int32, size int) int32
}

// Record is one plain record of ProduceRecords.
type Record struct {
	// Key and Value are nil for null (a value's null is a tombstone).
	Key, Value []byte
	Headers    []record.RecordHeader
	// Timestamp is in milliseconds since the epoch; 0 is the broker's
	// clock.
	Timestamp int64
	// Partition, when HasPartition, is the record's partition; else the
	// key's (murmur2, as Kafka's default partitioner), else the
	// Partitioner's.
	Partition    int32
	HasPartition bool
}

// ProduceRecordsRequest appends plain records to a topic: the broker
// partitions them, builds the batches and appends them as Produce does.
type ProduceRecordsRequest struct {
	Topic   string
	Acks    int32
	Timeout time.Duration
	Records []Record
	// ProducerID (-1: none), ProducerEpoch and BaseSequence make the
	// records an idempotent producer's: every record to one explicit
	// partition, sequences from BaseSequence in request order.
	ProducerID    int64
	ProducerEpoch int32
	BaseSequence  int32
	// TransactionalID makes them a transactional producer's (with a
	// producer id): written in its transaction, the partition joining it
	// on its first write (transaction version 2).
	TransactionalID string
	Route           bool
	Received        time.Time
}

// RecordResult is one record's answer, in request order.
type RecordResult struct {
	Partition int32
	Offset    int64 // -1 when not appended
	Timestamp int64
	// Err is an *Error, or nil.
	Err error
}

// ProduceRecords partitions plain records, builds one batch per partition
// (as many as max.message.bytes needs) and appends them as Produce does;
// Write on the topic, and Create when it would be created.
func (c *Core) ProduceRecords(ctx context.Context, req *ProduceRecordsRequest) ([]RecordResult, error) {
	switch req.Acks {
	case -1, 0, 1:
	default:
		return nil, c.fail(fmt.Errorf("%w: acks must be -1 (all), 0 or 1, not %d", ErrInvalidRequiredAcks, req.Acks))
	}
	if len(req.Records) == 0 {
		return nil, c.fail(fmt.Errorf("%w: no records", replica.ErrInvalidRequest))
	}
	_, known := c.cfg.Cluster.Topic(req.Topic)
	creator := c.cfg.Creator
	if isNode(ctx) {
		creator = nil
	}
	if err := c.authorizeTopics(ctx, auth.OpWrite, []string{req.Topic}, func(string) bool { return !known && creator != nil }); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, produceTimeout(req.Timeout))
	defer cancel()
	t, ok := c.cfg.Cluster.Topic(req.Topic)
	if !ok {
		if creator == nil {
			return nil, c.fail(unknownTopic(req.Topic))
		}
		if err := ValidateTopicName(req.Topic); err != nil {
			return nil, c.fail(err)
		}
		var err error
		if t, err = creator.AutoCreateTopic(ctx, req.Topic); err != nil {
			return nil, c.fail(err)
		}
	}
	n := int32(len(t.Partitions))
	now := c.cfg.Now().UnixMilli()
	idem, err := parseRecordsProducer(req)
	if err != nil {
		return nil, c.fail(err)
	}

	// Choose partitions, keeping request order within each.
	var order []int32
	byPart := map[int32][]int{}
	for i, r := range req.Records {
		var p int32
		switch {
		case r.HasPartition:
			p = r.Partition
			if p < 0 || p >= n {
				return nil, c.fail(invalidPartition(req.Topic, p, int(n)))
			}
		case r.Key != nil:
			p = partitioner.KeyPartition(r.Key, n)
		default:
			p = c.cfg.Partitioner.Partition(req.Topic, n, len(r.Value)+len(r.Key))
		}
		if _, seen := byPart[p]; !seen {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], i)
	}

	results := make([]RecordResult, len(req.Records))
	bld := record.NewBuilder(record.None)
	in := &ProduceRequest{Acks: req.Acks, Timeout: req.Timeout, Route: req.Route, Received: req.Received, TransactionalID: req.TransactionalID}
	limit := c.cfg.MaxMessageBytes(t)
	for _, p := range order {
		// A record that cannot fit any batch fails alone; the others of
		// the partition go in as many batches as max.message.bytes needs,
		// appended together (contiguous offsets, all or nothing).
		kept := byPart[p][:0:0]
		for _, i := range byPart[p] {
			r := req.Records[i]
			if size := record.HeaderSize + recordSizeBound(r); size > limit {
				if idem.on {
					// Sequences count every record of the request: refuse
					// it whole rather than leave a record out.
					return nil, c.fail(fmt.Errorf("%w: record %d of about %d bytes does not fit a batch of max.message.bytes %d of topic %q",
						storage.ErrRecordTooLarge, i, size, limit, req.Topic))
				}
				results[i] = RecordResult{Partition: p, Offset: -1, Timestamp: r.Timestamp, Err: c.fail(
					fmt.Errorf("%w: a record of about %d bytes does not fit a batch of max.message.bytes %d of topic %q",
						storage.ErrRecordTooLarge, size, limit, req.Topic))}
				continue
			}
			kept = append(kept, i)
		}
		byPart[p] = kept
		if len(kept) == 0 {
			continue
		}
		var batch []byte
		bld.Reset()
		for _, i := range kept {
			r := req.Records[i]
			if bld.Len() > 0 && bld.EstimatedSize()+recordSizeBound(r) > limit {
				batch = append(batch, idem.build(bld)...)
				bld.Reset()
			}
			ts := r.Timestamp
			if ts == 0 {
				ts = now
			}
			bld.Append(ts, r.Key, r.Value, r.Headers)
		}
		batch = append(batch, idem.build(bld)...)
		if err := idem.checkBatches(req.Topic, limit); err != nil {
			return nil, c.fail(err)
		}
		in.Partitions = append(in.Partitions, ProducePartition{Topic: req.Topic, Partition: p, Records: batch})
	}
	var parts []ProduceResult
	if len(in.Partitions) > 0 {
		// Checked and authorized above: appended (or passed on to the
		// leader) and waited for as a Produce.
		appended, err := c.append(ctx, in)
		if err != nil {
			return nil, err
		}
		parts = appended.Wait(ctx)
	}
	for _, res := range parts {
		for j, i := range byPart[res.Partition] {
			rr := RecordResult{Partition: res.Partition, Offset: -1, Timestamp: req.Records[i].Timestamp, Err: res.Err}
			if rr.Timestamp == 0 {
				rr.Timestamp = now
			}
			if res.LogAppendTime > 0 {
				rr.Timestamp = res.LogAppendTime
			}
			if res.Err == nil && res.BaseOffset >= 0 {
				rr.Offset = res.BaseOffset + int64(j)
			}
			results[i] = rr
		}
	}
	return results, nil
}

// recordSizeBound is the most bytes r takes in an uncompressed batch:
// its key, value and headers plus every varint at its longest.
func recordSizeBound(r Record) int {
	// length, attributes, timestamp delta, offset delta, key and value
	// lengths, header count.
	n := 5 + 1 + 10 + 5 + 5 + 5 + 5 + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// recordsProducer is the idempotent producer of a ProduceRecords request:
// its batches carry the producer id and epoch, and sequences from
// base_sequence on, one per record in request order.
type recordsProducer struct {
	on      bool
	id      int64
	epoch   int16
	seq     int32 // the next batch's base sequence
	batches int   // built so far
	txn     bool  // a transactional producer's
}

// parseRecordsProducer checks the producer fields of a ProduceRecords
// request (idempotence for plain gRPC clients).
func parseRecordsProducer(req *ProduceRecordsRequest) (recordsProducer, error) {
	if req.ProducerID == -1 {
		if req.TransactionalID != "" {
			return recordsProducer{}, fmt.Errorf("%w: transactional id %q without a producer id", replica.ErrInvalidRequest, req.TransactionalID)
		}
		return recordsProducer{}, nil
	}
	id, epoch, seq := req.ProducerID, req.ProducerEpoch, req.BaseSequence
	switch {
	case id < -1:
		return recordsProducer{}, fmt.Errorf("%w: producer id %d: one from InitProducerId, or -1 for none", replica.ErrInvalidRequest, id)
	case epoch < 0 || epoch > math.MaxInt16:
		return recordsProducer{}, fmt.Errorf("%w: producer epoch %d: 0 to %d", replica.ErrInvalidRequest, epoch, math.MaxInt16)
	case seq < 0:
		return recordsProducer{}, fmt.Errorf("%w: base sequence %d: 0 or more", replica.ErrInvalidRequest, seq)
	case req.Acks != -1:
		return recordsProducer{}, fmt.Errorf("%w: records of idempotent producer %d need acks=-1 (all), not acks=%d", replica.ErrInvalidRequest, id, req.Acks)
	}
	// A retry must reach the partition of the first try: the broker's
	// sticky choice would not.
	for i, r := range req.Records {
		if !r.HasPartition {
			return recordsProducer{}, fmt.Errorf("%w: record %d names no partition: with a producer id every record names the same explicit partition", replica.ErrInvalidRequest, i)
		}
		if r.Partition != req.Records[0].Partition {
			return recordsProducer{}, fmt.Errorf("%w: record %d is for partition %d, record 0 for %d: with a producer id every record names the same explicit partition",
				replica.ErrInvalidRequest, i, r.Partition, req.Records[0].Partition)
		}
	}
	return recordsProducer{on: true, id: id, epoch: int16(epoch), seq: seq, txn: req.TransactionalID != ""}, nil
}

// build builds bld's batch, with the producer's fields and the next
// sequences when on.
func (rp *recordsProducer) build(bld *record.Builder) []byte {
	if !rp.on {
		return bld.Build()
	}
	bld.SetProducer(rp.id, rp.epoch, rp.seq)
	bld.SetTransactional(rp.txn)
	rp.seq = nextSequence(rp.seq, int32(bld.Len()))
	rp.batches++
	return bld.Build()
}

// checkBatches refuses a request that took more batches than a partition
// remembers of a producer: a retry of it could not be recognised.
func (rp *recordsProducer) checkBatches(topic string, limit int) error {
	if rp.on && rp.batches > storage.ProducerWindow {
		return fmt.Errorf("%w: the records need %d batches of max.message.bytes %d of topic %q; with a producer id a request may take at most %d: send fewer records at a time",
			replica.ErrInvalidRequest, rp.batches, limit, topic, storage.ProducerWindow)
	}
	return nil
}

// nextSequence is seq advanced by n records, wrapping from 2^31-1 to 0 as
// Kafka's sequences do.
func nextSequence(seq, n int32) int32 {
	return int32((int64(seq) + int64(n)) % (math.MaxInt32 + 1))
}

// defaultMaxMessageBytes is Kafka's message.max.bytes default, for a
// Config without MaxMessageBytes.
func defaultMaxMessageBytes(metadata.TopicInfo) int { return 1048588 }
