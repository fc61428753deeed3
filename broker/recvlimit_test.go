package broker_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// TestProduceRequestOverReceiveLimit: a request over the gRPC receive
// limit (8 MiB at the default message.max.bytes) is answered with a
// quire.v1.Error whose message names the key to raise, for unary and
// streaming calls alike.
func TestProduceRequestOverReceiveLimit(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "huge", 1, nil)
	value := strings.Repeat("x", 9<<20)
	_, err := c.producer.ProduceRecords(ctxT(t), &quirev1.ProduceRecordsRequest{Topic: "huge", Records: []*quirev1.ProduceRecord{{ValueData: &quirev1.ProduceRecord_Value{Value: value}}}})
	wantStatus(t, err, codes.ResourceExhausted, quirev1.ErrorCode_MESSAGE_TOO_LARGE, "raise message.max.bytes", "8388608 bytes")

	stream, err := c.producer.ProduceStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: 1}, Partitions: []*quirev1.PartitionRecords{{Topic: "huge", Records: []byte(value)}}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantStatus(t, err, codes.ResourceExhausted, quirev1.ErrorCode_MESSAGE_TOO_LARGE, "raise message.max.bytes")
}
