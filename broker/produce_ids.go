package broker

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/storage"
)

// producerIDBlocks is where a broker gets blocks of producer ids: the
// controller, through the metadata log (cluster.allocateProducerIDs).
type producerIDBlocks interface {
	allocateProducerIDs(ctx context.Context) (metadata.ProducerIDBlock, error)
	image() *metadata.Image
}

// producerIDs hands out this broker's producer ids, one block from the
// controller at a time. A block is committed in the metadata log before
// the broker gets it, so no id is handed out twice, by this broker or any
// other, across restarts and controller failovers; the ids of a block
// left unused when the broker stops are never used.
type producerIDs struct {
	src producerIDBlocks

	mu        sync.Mutex
	next, end int64 // the current block's unused ids: next to end-1
	// blockEnd is end, readable without mu (which an allocation holds):
	// every id below it was handed out, even before this broker's image
	// shows the block.
	blockEnd atomic.Int64
}

func newProducerIDs(src producerIDBlocks) *producerIDs {
	return &producerIDs{src: src}
}

// newID hands out a producer id no producer had before.
func (p *producerIDs) newID(ctx context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		// Under the lock: callers wait for the one allocation.
		block, err := p.src.allocateProducerIDs(ctx)
		if err != nil {
			return -1, fmt.Errorf("allocate producer ids: %w", err)
		}
		p.next, p.end = block.First, block.First+block.Size
		p.blockEnd.Store(p.end)
	}
	id := p.next
	p.next++
	return id, nil
}

// initProducerID answers InitProducerId. A new producer (no id, or -1)
// gets a new id at epoch 0. A producer that holds an id and epoch (KIP-360:
// its state on some partition is unknown or out of order) gets the same id
// at the next epoch: the epoch is the producer's own counter, carried by
// its batches, which every partition checks (an older epoch than the one a
// partition saw is INVALID_PRODUCER_EPOCH there, a newer one starts again
// at sequence 0), so the bump needs no state on the broker, as Kafka's
// idempotent producers bump theirs on the client. An id no broker was
// handed (at or past the metadata image's next producer id) or an epoch
// that cannot grow gets a new id instead.
func (p *producerIDs) initProducerID(ctx context.Context, req *quirev1.InitProducerIdRequest) (*quirev1.InitProducerIdResponse, error) {
	id, epoch := int64(-1), req.ProducerEpoch
	if req.OptionalProducerId != nil {
		id = req.GetProducerId()
	}
	if id < -1 {
		return nil, fmt.Errorf("%w: producer id %d: -1 or unset for a new producer", ErrInvalidRequest, id)
	}
	if id >= 0 {
		if epoch < 0 || epoch > math.MaxInt16 {
			return nil, fmt.Errorf("%w: producer epoch %d of producer %d: 0 to %d", ErrInvalidRequest, epoch, id, math.MaxInt16)
		}
		// The image this broker serves from may not show its own latest
		// block yet: an id below that block's end was handed out too.
		if handed := max(p.src.image().NextProducerID(), p.blockEnd.Load()); id < handed && epoch < math.MaxInt16 {
			return &quirev1.InitProducerIdResponse{ProducerId: id, ProducerEpoch: epoch + 1}, nil
		}
	}
	id, err := p.newID(ctx)
	if err != nil {
		return nil, err
	}
	return &quirev1.InitProducerIdResponse{ProducerId: id, ProducerEpoch: 0}, nil
}

// InitProducerId gives an idempotent producer its id and epoch (see
// producerIDs.initProducerID).
func (s *producerService) InitProducerId(ctx context.Context, req *quirev1.InitProducerIdRequest) (*quirev1.InitProducerIdResponse, error) {
	resp, err := s.pids.initProducerID(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// allocateProducerIDs asks the controller for a block of producer ids at
// this broker's current registration.
func (c *cluster) allocateProducerIDs(ctx context.Context) (metadata.ProducerIDBlock, error) {
	epoch := c.lifecycle.Epoch()
	if epoch == 0 {
		return metadata.ProducerIDBlock{}, fmt.Errorf("%w: broker %d is not registered yet", ErrBrokersNotReady, c.cfg.NodeID)
	}
	if c.image().MetadataVersion() < metadata.MetadataVersionProducerIDs {
		// The controller raises the level by itself once every broker
		// supports it, shortly after they register: give it that long
		// before the call fails naming the brokers that hold it back.
		wctx, cancel := context.WithTimeout(ctx, levelWait)
		_, _ = c.waitFor(wctx, func(img *metadata.Image) bool {
			return img.MetadataVersion() >= metadata.MetadataVersionProducerIDs
		})
		cancel()
	}
	return c.fwd.AllocateProducerIDs(ctx, c.cfg.NodeID, epoch)
}

// levelWait bounds the wait for metadata.version 2 before producer ids
// are asked for.
const levelWait = 5 * time.Second

// recordsProducer is the idempotent producer of a ProduceRecords request:
// its batches carry the producer id and epoch, and sequences from
// base_sequence on, one per record in request order.
type recordsProducer struct {
	on      bool
	id      int64
	epoch   int16
	seq     int32 // the next batch's base sequence
	batches int   // built so far
}

// parseRecordsProducer checks the producer fields of a ProduceRecords
// request (idempotence for plain gRPC clients).
func parseRecordsProducer(req *quirev1.ProduceRecordsRequest, acks int32) (recordsProducer, error) {
	if req.OptionalProducerId == nil || req.GetProducerId() == -1 {
		return recordsProducer{}, nil
	}
	id, epoch, seq := req.GetProducerId(), req.ProducerEpoch, req.BaseSequence
	switch {
	case id < -1:
		return recordsProducer{}, fmt.Errorf("%w: producer id %d: one from InitProducerId, or -1 for none", ErrInvalidRequest, id)
	case epoch < 0 || epoch > math.MaxInt16:
		return recordsProducer{}, fmt.Errorf("%w: producer epoch %d: 0 to %d", ErrInvalidRequest, epoch, math.MaxInt16)
	case seq < 0:
		return recordsProducer{}, fmt.Errorf("%w: base sequence %d: 0 or more", ErrInvalidRequest, seq)
	case acks != -1:
		return recordsProducer{}, fmt.Errorf("%w: records of idempotent producer %d need acks=-1 (all), not acks=%d", ErrInvalidRequest, id, acks)
	}
	// A retry must reach the partition of the first try: the broker's
	// sticky choice would not.
	for i, r := range req.Records {
		if r.OptionalPartition == nil {
			return recordsProducer{}, fmt.Errorf("%w: record %d names no partition: with a producer id every record names the same explicit partition", ErrInvalidRequest, i)
		}
		if r.GetPartition() != req.Records[0].GetPartition() {
			return recordsProducer{}, fmt.Errorf("%w: record %d is for partition %d, record 0 for %d: with a producer id every record names the same explicit partition",
				ErrInvalidRequest, i, r.GetPartition(), req.Records[0].GetPartition())
		}
	}
	return recordsProducer{on: true, id: id, epoch: int16(epoch), seq: seq}, nil
}

// build builds bld's batch, with the producer's fields and the next
// sequences when on.
func (rp *recordsProducer) build(bld *record.Builder) []byte {
	if !rp.on {
		return bld.Build()
	}
	bld.SetProducer(rp.id, rp.epoch, rp.seq)
	rp.seq = nextSequence(rp.seq, int32(bld.Len()))
	rp.batches++
	return bld.Build()
}

// checkBatches refuses a request that took more batches than a partition
// remembers of a producer: a retry of it could not be recognised.
func (rp *recordsProducer) checkBatches(topic string, limit int) error {
	if rp.on && rp.batches > storage.ProducerWindow {
		return fmt.Errorf("%w: the records need %d batches of max.message.bytes %d of topic %q; with a producer id a request may take at most %d: send fewer records at a time",
			ErrInvalidRequest, rp.batches, limit, topic, storage.ProducerWindow)
	}
	return nil
}

// nextSequence is seq advanced by n records, wrapping from 2^31-1 to 0 as
// Kafka's sequences do.
func nextSequence(seq, n int32) int32 {
	return int32((int64(seq) + int64(n)) % (math.MaxInt32 + 1))
}
