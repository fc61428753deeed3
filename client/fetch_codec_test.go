package client

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// TestFetchCodec checks that the hand decoder agrees with proto, and falls
// back to proto for what it does not know.
func TestFetchCodec(t *testing.T) {
	t.Parallel()
	resps := []*quirev1.FetchResponse{
		{},
		{Partitions: []*quirev1.FetchPartitionResult{{}}},
		{Partitions: []*quirev1.FetchPartitionResult{
			{Topic: "a", Partition: 0, HighWatermark: 10, LogEndOffset: 12, Records: bytes.Repeat([]byte{1}, 100)},
			{Topic: "bé", Partition: -3, HighWatermark: -1, LogEndOffset: -1, LogStartOffset: -1,
				Error: &quirev1.Error{Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, Message: "moved", Retriable: true, LeaderId: 2}},
			{Topic: "c", Partition: 7, HighWatermark: 1 << 40, LogEndOffset: 1 << 41, LogStartOffset: 5, Records: bytes.Repeat([]byte{2}, 70000)},
		}},
	}
	for i, want := range resps {
		wire, err := protobuf.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		// An unknown field makes it fall back to proto.
		unknown := append(append([]byte(nil), wire...), 0x10, 1) // field 2 (tag 0x10: field 2, varint), value 1
		for j, w := range [][]byte{wire, unknown} {
			var data mem.BufferSlice
			for len(w) > 0 {
				n := min(len(w), 1000)
				data = append(data, mem.SliceBuffer(w[:n]))
				w = w[n:]
			}
			got := &quirev1.FetchResponse{Partitions: []*quirev1.FetchPartitionResult{{Topic: "stale"}}}
			if err := (fetchCodec{}).Unmarshal(data, got); err != nil {
				t.Fatal(err)
			}
			if j == 0 && !protobuf.Equal(got, want) {
				t.Fatalf("response %d: got %v, want %v", i, got, want)
			}
			if j == 1 && (len(got.Partitions) != len(want.Partitions) || len(got.ProtoReflect().GetUnknown()) == 0) {
				t.Fatalf("response %d with an unknown field: got %v", i, got)
			}
		}
	}
}
