package controlplane

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/metadata"
)

// errorDomain names Quire's controller errors in google.rpc.ErrorInfo.
const errorDomain = "controller.quire"

// errorTable maps each metadata sentinel to a gRPC code and the reason
// carried in the status detail, so the far side gets the sentinel back.
var errorTable = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{metadata.ErrNotController, codes.FailedPrecondition, "NOT_CONTROLLER"},
	{metadata.ErrTopicExists, codes.AlreadyExists, "TOPIC_ALREADY_EXISTS"},
	{metadata.ErrUnknownTopic, codes.NotFound, "UNKNOWN_TOPIC_OR_PARTITION"},
	{metadata.ErrInvalidPartitions, codes.InvalidArgument, "INVALID_PARTITIONS"},
	{metadata.ErrInvalidReplicationFactor, codes.InvalidArgument, "INVALID_REPLICATION_FACTOR"},
	{metadata.ErrUnknownBroker, codes.NotFound, "UNKNOWN_BROKER"},
	{metadata.ErrFencedBroker, codes.FailedPrecondition, "STALE_BROKER_EPOCH"},
	{metadata.ErrStaleEpoch, codes.FailedPrecondition, "STALE_EPOCH"},
	{metadata.ErrNoQuorum, codes.Unavailable, "NO_QUORUM"},
	{metadata.ErrShutdown, codes.Unavailable, "SHUTTING_DOWN"},
	{metadata.ErrClusterIDMismatch, codes.FailedPrecondition, "CLUSTER_ID_MISMATCH"},
	{metadata.ErrBrokerNotRemovable, codes.FailedPrecondition, "BROKER_NOT_REMOVABLE"},
	{metadata.ErrInvalidGroupID, codes.InvalidArgument, "INVALID_GROUP_ID"},
	{metadata.ErrInvalidOffsetCommit, codes.InvalidArgument, "INVALID_OFFSET_COMMIT"},
	{metadata.ErrUnknownGroup, codes.NotFound, "GROUP_ID_NOT_FOUND"},
	{metadata.ErrUnsupportedVersion, codes.FailedPrecondition, "UNSUPPORTED_VERSION"},
	{metadata.ErrFeatureUpdateFailed, codes.FailedPrecondition, "FEATURE_UPDATE_FAILED"},
	{metadata.ErrUnknownCommand, codes.Internal, "UNKNOWN_COMMAND"},
}

// toStatus turns a metadata error into a gRPC status error.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, metadata.ErrNoQuorum) {
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if errors.Is(err, context.Canceled) && !errors.Is(err, metadata.ErrNoQuorum) {
		return status.Error(codes.Canceled, err.Error())
	}
	for _, e := range errorTable {
		if !errors.Is(err, e.err) {
			continue
		}
		st := status.New(e.code, err.Error())
		info := &errdetails.ErrorInfo{Reason: e.reason, Domain: errorDomain}
		var withD *status.Status
		var derr error
		var nc *metadata.NotControllerError
		if errors.As(err, &nc) {
			withD, derr = st.WithDetails(info, &pb.NotController{ControllerId: nc.LeaderID, ControllerAddr: nc.LeaderAddr})
		} else {
			withD, derr = st.WithDetails(info)
		}
		if derr == nil {
			st = withD
		}
		return st.Err()
	}
	return status.Error(codes.Internal, err.Error())
}

// remoteError is a metadata error that came back over gRPC: it reads as
// the far side's message and unwraps to the sentinel.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// fromStatus turns a gRPC error from ControllerService back into the
// metadata error it stood for; transport errors are returned as they are.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var reason string
	var nc *pb.NotController
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.Domain == errorDomain {
				reason = d.Reason
			}
		case *pb.NotController:
			nc = d
		}
	}
	if nc != nil {
		return &metadata.NotControllerError{LeaderID: nc.ControllerId, LeaderAddr: nc.ControllerAddr}
	}
	for _, e := range errorTable {
		if e.reason == reason {
			return &remoteError{msg: st.Message(), sentinel: e.err}
		}
	}
	return err
}

// retriable reports whether a call may succeed on another try: the
// controller moved or is being elected, or the node could not be reached.
func retriable(err error) bool {
	if errors.Is(err, metadata.ErrNotController) || errors.Is(err, metadata.ErrNoQuorum) || errors.Is(err, metadata.ErrShutdown) {
		return true
	}
	var re *remoteError
	if errors.As(err, &re) {
		return false
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable, codes.Unknown, codes.Aborted:
			return true
		}
	}
	return false
}
