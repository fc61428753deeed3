package controlplane

import (
	"context"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/metadata"
)

// AllocateProducerIds hands a broker the next block of producer ids on
// this node's controller.
func (s *Service) AllocateProducerIds(ctx context.Context, in *pb.AllocateProducerIdsRequest) (*pb.AllocateProducerIdsResponse, error) {
	block, err := s.node.Ctl().AllocateProducerIDs(ctx, in.BrokerId, in.BrokerEpoch)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.AllocateProducerIdsResponse{FirstProducerId: block.First, Size: block.Size}, nil
}

// AllocateProducerIDs asks the controller for the next block of producer
// ids for broker brokerID at brokerEpoch (see
// metadata.Controller.AllocateProducerIDs). The block is committed in the
// metadata log before it is answered, so a new controller never hands it
// out again. A call retried after an ambiguous failure may take a block
// that is never used; ids are plentiful.
func (f *Forwarder) AllocateProducerIDs(ctx context.Context, brokerID int32, brokerEpoch int64) (metadata.ProducerIDBlock, error) {
	resp, err := Call(ctx, f, (*Service).AllocateProducerIds, pb.ControllerServiceClient.AllocateProducerIds,
		&pb.AllocateProducerIdsRequest{BrokerId: brokerID, BrokerEpoch: brokerEpoch})
	if err != nil {
		return metadata.ProducerIDBlock{}, err
	}
	return metadata.ProducerIDBlock{BrokerID: brokerID, First: resp.GetFirstProducerId(), Size: resp.GetSize()}, nil
}
