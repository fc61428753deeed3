// Package wire holds the hand-written protobuf codecs of the broker's and
// the Go client's hot paths, both directions of each beside the field
// numbers they use: the produce request (EncodeProduce in the client,
// DecodeProduceRequest in the broker), the fetch response
// (EncodeFetchResponse in the broker, DecodeFetchResponse in the client)
// and the records of a Subscribe stream (RecordsEncoder in the broker;
// any client decodes them with its own protobuf runtime).
// The field numbers are read from the generated descriptors, so the codecs
// cannot drift from proto/quire/v1: a renamed or removed field panics at
// start-up. The decoders accept only what proto.Unmarshal accepts and
// decode it to an equal message (their callers fall back to proto for the
// rest), and the encoders write what proto.Marshal writes; the fuzz
// targets beside them check that against proto.
//
// It imports the generated messages, protobuf's wire helpers and gRPC's
// mem buffers, and nothing of the broker or client: the gRPC codec glue
// stays with them.
package wire

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// quire.v1.ProduceRequest and PartitionRecords.
var (
	ProduceAcks          = field(&quirev1.ProduceRequest{}, "acks")
	ProduceTimeoutMs     = field(&quirev1.ProduceRequest{}, "timeout_ms")
	ProducePartitions    = field(&quirev1.ProduceRequest{}, "partitions")
	ProduceCorrelationID = field(&quirev1.ProduceRequest{}, "correlation_id")

	PartitionTopic     = field(&quirev1.PartitionRecords{}, "topic")
	PartitionPartition = field(&quirev1.PartitionRecords{}, "partition")
	PartitionRecords   = field(&quirev1.PartitionRecords{}, "records")
)

// quire.v1.FetchResponse and FetchPartitionResult.
var (
	FetchPartitions = field(&quirev1.FetchResponse{}, "partitions")

	FetchTopic          = field(&quirev1.FetchPartitionResult{}, "topic")
	FetchPartition      = field(&quirev1.FetchPartitionResult{}, "partition")
	FetchError          = field(&quirev1.FetchPartitionResult{}, "error")
	FetchHighWatermark  = field(&quirev1.FetchPartitionResult{}, "high_watermark")
	FetchLogEndOffset   = field(&quirev1.FetchPartitionResult{}, "log_end_offset")
	FetchLogStartOffset = field(&quirev1.FetchPartitionResult{}, "log_start_offset")
	FetchRecords        = field(&quirev1.FetchPartitionResult{}, "records")
	FetchLastStable     = field(&quirev1.FetchPartitionResult{}, "last_stable_offset")
	FetchAborted        = field(&quirev1.FetchPartitionResult{}, "aborted_transactions")
)

func field(m proto.Message, name string) protowire.Number {
	f := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name))
	if f == nil {
		panic("wire: " + string(m.ProtoReflect().Descriptor().FullName()) + " has no field " + name)
	}
	return f.Number()
}
