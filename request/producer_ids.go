package request

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
)

// ProducerIDBlocks is where a broker gets blocks of producer ids: the
// controller, through the metadata log.
type ProducerIDBlocks interface {
	AllocateProducerIDs(ctx context.Context) (metadata.ProducerIDBlock, error)
	// NextProducerID is the metadata image's next producer id: every id
	// below it was handed out to some broker.
	NextProducerID() int64
}

// producerIDs hands out this broker's producer ids, one block from the
// controller at a time. A block is committed in the metadata log before
// the broker gets it, so no id is handed out twice, by this broker or any
// other, across restarts and controller failovers; the ids of a block
// left unused when the broker stops are never used.
type producerIDs struct {
	mu        sync.Mutex
	next, end int64 // the current block's unused ids: next to end-1
	// blockEnd is end, readable without mu (which an allocation holds):
	// every id below it was handed out, even before this broker's image
	// shows the block.
	blockEnd atomic.Int64
}

// newID hands out a producer id no producer had before.
func (c *Core) newProducerID(ctx context.Context) (int64, error) {
	p := &c.pids
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		// Under the lock: callers wait for the one allocation.
		block, err := c.cfg.ProducerIDs.AllocateProducerIDs(ctx)
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

// InitProducerIDRequest asks for an idempotent producer's id and epoch:
// ProducerID -1 for a new producer, or the id and epoch it holds.
type InitProducerIDRequest struct {
	ProducerID    int64
	ProducerEpoch int32
}

// InitProducerIDResult is the id and epoch to produce with.
type InitProducerIDResult struct {
	ProducerID    int64
	ProducerEpoch int16
}

// InitProducerID answers InitProducerId, for a caller with IdempotentWrite
// on the cluster or Write on some topic (Kafka's rule, KIP-679). A new
// producer gets a new id at epoch 0. A producer that holds an id and
// epoch (KIP-360: its state on some partition is unknown or out of order)
// gets the same id at the next epoch: the epoch is the producer's own
// counter, carried by its batches, which every partition checks (an older
// epoch than the one a partition saw is INVALID_PRODUCER_EPOCH there, a
// newer one starts again at sequence 0), so the bump needs no state on
// the broker, as Kafka's idempotent producers bump theirs on the client.
// An id no broker was handed (at or past the metadata image's next
// producer id) or an epoch that cannot grow gets a new id instead.
func (c *Core) InitProducerID(ctx context.Context, req InitProducerIDRequest) (InitProducerIDResult, error) {
	none := InitProducerIDResult{ProducerID: -1, ProducerEpoch: -1}
	if err := c.authorizeIdempotentWrite(ctx); err != nil {
		return none, err
	}
	if c.cfg.ProducerIDs == nil {
		return none, c.fail(fmt.Errorf("%w: this broker hands out no producer ids", replica.ErrInvalidRequest))
	}
	id, epoch := req.ProducerID, req.ProducerEpoch
	if id < -1 {
		return none, c.fail(fmt.Errorf("%w: producer id %d: -1 or unset for a new producer", replica.ErrInvalidRequest, id))
	}
	if id >= 0 {
		if epoch < 0 || epoch > math.MaxInt16 {
			return none, c.fail(fmt.Errorf("%w: producer epoch %d of producer %d: 0 to %d", replica.ErrInvalidRequest, epoch, id, math.MaxInt16))
		}
		// The image this broker serves from may not show its own latest
		// block yet: an id below that block's end was handed out too.
		if handed := max(c.cfg.ProducerIDs.NextProducerID(), c.pids.blockEnd.Load()); id < handed && epoch < math.MaxInt16 {
			return InitProducerIDResult{ProducerID: id, ProducerEpoch: int16(epoch + 1)}, nil
		}
	}
	id, err := c.newProducerID(ctx)
	if err != nil {
		return none, c.fail(err)
	}
	return InitProducerIDResult{ProducerID: id, ProducerEpoch: 0}, nil
}

// authorizeIdempotentWrite refuses InitProducerID unless the caller may
// write somewhere: it writes the metadata log (a block of ids) and bumps
// a producer's epoch.
func (c *Core) authorizeIdempotentWrite(ctx context.Context) error {
	z := c.cfg.Authorizer
	if z == nil {
		return nil
	}
	r := auth.Request{Principal: Principal(ctx), Operation: auth.OpIdempotentWrite, ResourceType: auth.ResourceCluster, ResourceName: auth.ClusterName}
	if z.Authorize(r) || z.AuthorizeAny(r.Principal, auth.OpWrite, auth.ResourceTopic) {
		return nil
	}
	return c.fail(fmt.Errorf("%w (nor Write on any topic)", Refusal(r)))
}
