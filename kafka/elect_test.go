package kafka

import (
	"context"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/request"
)

func (f *fakeBackend) ElectLeaders(context.Context, []request.TopicPartitions) ([]request.PartitionResult, error) {
	return nil, errUnimplemented()
}

// ElectLeaders of adminBackend: partition 0 of "existing" is led by its
// preferred replica, partition 1 has it out of sync, any other is
// unknown.
func (a *adminBackend) ElectLeaders(_ context.Context, topics []request.TopicPartitions) ([]request.PartitionResult, error) {
	a.mu.Lock()
	a.calls = append(a.calls, "ElectLeaders")
	a.mu.Unlock()
	var resp []request.PartitionResult
	for _, t := range topics {
		for _, p := range t.Partitions {
			r := request.PartitionResult{Topic: t.Topic, Partition: p}
			switch {
			case t.Topic == "existing" && p == 0:
				r.Err = &request.Error{Code: int32(quirev1.ErrorCode_ELECTION_NOT_NEEDED), Message: "existing-0: its preferred replica leads it"}
			case t.Topic == "existing" && p == 1:
				r.Err = &request.Error{Code: int32(quirev1.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE), Message: "existing-1: not in the ISR"}
			default:
				r.Err = &request.Error{Code: int32(quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION), Message: "unknown"}
			}
			resp = append(resp, r)
		}
	}
	return resp, nil
}
