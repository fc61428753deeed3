package controlplane

import (
	"context"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
)

// ElectLeaders moves leadership to the preferred replicas on the
// controller. A topic naming no partitions stands for every partition it
// has (an unknown one for its partition -1, answered unknown); no topics
// for every partition of the cluster.
func (s *Service) ElectLeaders(ctx context.Context, in *quirev1.ElectLeadersRequest) (*quirev1.ElectLeadersResponse, error) {
	var parts []metadata.TopicPartition
	img := s.node.Image()
	for _, t := range in.Topics {
		if len(t.Partitions) == 0 {
			info, ok := img.Topic(t.Topic)
			if !ok {
				parts = append(parts, metadata.TopicPartition{Topic: t.Topic, Partition: -1})
				continue
			}
			for p := range info.Partitions {
				parts = append(parts, metadata.TopicPartition{Topic: t.Topic, Partition: int32(p)})
			}
			continue
		}
		for _, p := range t.Partitions {
			parts = append(parts, metadata.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	res, err := s.node.Ctl().ElectPreferredLeaders(ctx, parts)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &quirev1.ElectLeadersResponse{Partitions: make([]*quirev1.ElectLeadersResult, len(res))}
	for i, r := range res {
		out.Partitions[i] = &quirev1.ElectLeadersResult{Topic: r.Topic, Partition: r.Partition, Error: ErrorOf(r.Err)}
	}
	return out, nil
}

// ElectLeaders moves leadership to the preferred replicas on the
// controller (Service.ElectLeaders).
func (f *Forwarder) ElectLeaders(ctx context.Context, in *quirev1.ElectLeadersRequest) (*quirev1.ElectLeadersResponse, error) {
	return Call(ctx, f, (*Service).ElectLeaders, pb.ControllerServiceClient.ElectLeaders, in)
}
