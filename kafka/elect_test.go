package kafka

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

func (f *fakeBackend) ElectLeaders(context.Context, *quirev1.ElectLeadersRequest) (*quirev1.ElectLeadersResponse, error) {
	return nil, errUnimplemented()
}

// ElectLeaders of adminBackend: partition 0 of "existing" is led by its
// preferred replica, partition 1 has it out of sync, any other is
// unknown.
func (a *adminBackend) ElectLeaders(_ context.Context, req *quirev1.ElectLeadersRequest) (*quirev1.ElectLeadersResponse, error) {
	a.mu.Lock()
	a.calls = append(a.calls, "ElectLeaders")
	a.mu.Unlock()
	resp := &quirev1.ElectLeadersResponse{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			r := &quirev1.ElectLeadersResult{Topic: t.Topic, Partition: p}
			switch {
			case t.Topic == "existing" && p == 0:
				r.Error = &quirev1.Error{Code: quirev1.ErrorCode_ELECTION_NOT_NEEDED, Message: "existing-0: its preferred replica leads it"}
			case t.Topic == "existing" && p == 1:
				r.Error = &quirev1.Error{Code: quirev1.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE, Message: "existing-1: not in the ISR"}
			default:
				r.Error = &quirev1.Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: "unknown"}
			}
			resp.Partitions = append(resp.Partitions, r)
		}
	}
	return resp, nil
}
