package broker

import (
	"context"
	"fmt"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// methodElectLeaders is the gRPC method Kafka's ElectLeaders is
// authorized as (ALTER on the cluster, as in Kafka).
const methodElectLeaders = "/quire.v1.Admin/ElectLeaders"

// ElectLeaders moves leadership to the preferred replicas on the
// controller: each partition's refusal (election not needed, preferred
// replica not available, unknown) is in the answer.
func (s *adminService) ElectLeaders(ctx context.Context, req *quirev1.ElectLeadersRequest) (*quirev1.ElectLeadersResponse, error) {
	resp, err := s.b.cluster.fwd.ElectLeaders(ctx, req)
	if err != nil {
		return nil, toStatus(fmt.Errorf("elect leaders: %w", err))
	}
	return resp, nil
}

func (k kafkaBackend) ElectLeaders(ctx context.Context, req *quirev1.ElectLeadersRequest) (*quirev1.ElectLeadersResponse, error) {
	if err := k.b.authorizeKafka(ctx, methodElectLeaders, req); err != nil {
		return nil, err
	}
	return k.admin.ElectLeaders(ctx, req)
}
