package broker

import (
	"context"
	"fmt"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
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
