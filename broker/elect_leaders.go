package broker

import (
	"context"
	"fmt"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
)

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
	// Alter on the cluster, as the gRPC call and Kafka need.
	if err := k.b.authorizeKafkaNeed(ctx, clusterNeed(auth.OpAlter)); err != nil {
		return nil, err
	}
	return k.admin.ElectLeaders(ctx, req)
}
