package replica

import (
	"errors"
	"fmt"
)

// Replica errors. Front ends map them to their protocol's codes (the
// broker's error table for gRPC); wrap them with %w and the partition.
var (
	ErrUnknownTopicOrPartition      = errors.New("replica: unknown topic or partition")
	ErrInvalidRequest               = errors.New("replica: invalid request")
	ErrNotLeader                    = errors.New("replica: not leader or follower")
	ErrLeaderNotAvailable           = errors.New("replica: leader not available")
	ErrNotEnoughReplicas            = errors.New("replica: not enough replicas")
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: not enough replicas after append")
	ErrRequestTimedOut              = errors.New("replica: request timed out")
	ErrFencedLeaderEpoch            = errors.New("replica: fenced leader epoch")
	ErrUnknownLeaderEpoch           = errors.New("replica: unknown leader epoch")
	ErrStaleBrokerEpoch             = errors.New("replica: stale broker epoch")
	// ErrOffsetNotAvailable: a leader elected moments ago whose high
	// watermark has not yet reached the start of its epoch cannot answer
	// the latest offset (see Partition.HighWatermarkEstablished).
	ErrOffsetNotAvailable = errors.New("replica: offset not available")
	// ErrISRRefused marks an ISR change the controller refused (a newer
	// epoch, a fenced follower), as opposed to one it did not answer.
	// Controller implementations wrap their refusals with it.
	ErrISRRefused = errors.New("replica: ISR change refused")
)

// NotLeaderError says which broker leads, when this one does not. With no
// leader (-1: an election pending, or the partition offline because its
// only in-sync replica lost its data) it is ErrLeaderNotAvailable, as in
// Kafka: retriable, and the client refreshes metadata rather than chase a
// leader that does not exist.
type NotLeaderError struct {
	Topic     string
	Partition int32
	Leader    int32
	Epoch     int32
}

func (e *NotLeaderError) Error() string {
	if e.Leader < 0 {
		return fmt.Sprintf("%v: %s-%d has no leader (epoch %d)", ErrLeaderNotAvailable, e.Topic, e.Partition, e.Epoch)
	}
	return fmt.Sprintf("%v: %s-%d is led by broker %d (epoch %d)", ErrNotLeader, e.Topic, e.Partition, e.Leader, e.Epoch)
}

func (e *NotLeaderError) Unwrap() error {
	if e.Leader < 0 {
		return ErrLeaderNotAvailable
	}
	return ErrNotLeader
}

func unknownPartition(topic string, p int32) error {
	return fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topic, p)
}
