package kafka

import (
	"context"

	"github.com/quirelog/quire/request"
)

func (f *fakeBackend) AlterPartitionReassignments(context.Context, []request.ReassignmentTarget) ([]request.PartitionResult, error) {
	return nil, errUnimplemented()
}

func (f *fakeBackend) ListPartitionReassignments(context.Context, []request.PartitionsOf) ([]request.PendingReassignment, error) {
	return nil, errUnimplemented()
}
