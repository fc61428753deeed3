package kafka

import (
	"context"

	"github.com/quirelog/quire/request"
)

func (f *fakeBackend) AlterPartitionReassignments(context.Context, []request.ReassignmentTarget) error {
	return errUnimplemented()
}

func (f *fakeBackend) ListPartitionReassignments(context.Context, []request.PartitionsOf) ([]request.PendingReassignment, error) {
	return nil, errUnimplemented()
}
