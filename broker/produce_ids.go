package broker

import (
	"context"
	"fmt"
	"math"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/storage"
)

// InitProducerId gives an idempotent producer its id and epoch (the
// request core's InitProducerID, which authorizes it).
func (s *producerService) InitProducerId(ctx context.Context, req *quirev1.InitProducerIdRequest) (*quirev1.InitProducerIdResponse, error) {
	in := request.InitProducerIDRequest{ProducerID: -1, ProducerEpoch: req.ProducerEpoch}
	if req.OptionalProducerId != nil {
		in.ProducerID = req.GetProducerId()
	}
	out, err := s.b.core.InitProducerID(coreContext(ctx), in)
	if err != nil {
		return nil, toStatus(err)
	}
	return &quirev1.InitProducerIdResponse{ProducerId: out.ProducerID, ProducerEpoch: int32(out.ProducerEpoch)}, nil
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
