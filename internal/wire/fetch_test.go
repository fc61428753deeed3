package wire

import (
	"bytes"
	"testing"

	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// TestEncodeFetchResponse checks that the hand encoder writes what proto
// writes, with big records sections referenced rather than copied.
func TestEncodeFetchResponse(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 70000)
	resps := []*quirev1.FetchResponse{
		{},
		{Partitions: []*quirev1.FetchPartitionResult{{}}},
		{Partitions: []*quirev1.FetchPartitionResult{
			{Topic: "a", Partition: 0, HighWatermark: 10, LogEndOffset: 12, LogStartOffset: 0, Records: bytes.Repeat([]byte{1}, 100)},
			{Topic: "bé", Partition: -3, HighWatermark: -1, LogEndOffset: -1, LogStartOffset: -1,
				Error: &quirev1.Error{Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, Message: "moved", Retriable: true, LeaderId: 2}},
			{Topic: "c", Partition: 7, HighWatermark: 1 << 40, LogEndOffset: 1 << 41, LogStartOffset: 5, Records: big},
		}},
		// Transactions: the last stable offset and aborted transactions
		// after the records, whether inlined or not.
		{Partitions: []*quirev1.FetchPartitionResult{
			{Topic: "t", HighWatermark: 10, LastStableOffset: 4, Records: bytes.Repeat([]byte{1}, 100),
				AbortedTransactions: []*quirev1.AbortedTransaction{{ProducerId: 3, FirstOffset: 1}, {ProducerId: 9}}},
			{Topic: "u", HighWatermark: 10, LastStableOffset: -1, Records: big,
				AbortedTransactions: []*quirev1.AbortedTransaction{{ProducerId: 1, FirstOffset: 2}}},
		}},
	}
	for i, r := range resps {
		want, err := protobuf.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		data, err := EncodeFetchResponse(r, SliceBuffers{})
		if err != nil {
			t.Fatal(err)
		}
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("response %d: encoded\n%x\nproto\n%x", i, got, want)
		}
		for _, b := range data {
			if len(b.ReadOnlyData()) == len(big) && &b.ReadOnlyData()[0] != &big[0] {
				t.Fatalf("response %d: records copied", i)
			}
		}
		var back quirev1.FetchResponse
		if !DecodeFetchResponse(want, &back) || !protobuf.Equal(&back, r) {
			t.Fatalf("response %d: decoded %v, want %v", i, &back, r)
		}
	}
}
