package service

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
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
