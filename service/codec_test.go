package service

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/wire"
)

// TestServerCodecProduceRequest checks that the hand decoder agrees with
// proto, aliases one copy of the message for the records, and falls back
// to proto for what it does not know.
func TestServerCodecProduceRequest(t *testing.T) {
	t.Parallel()
	acks := int32(-1)
	reqs := []*quirev1.ProduceRequest{
		{},
		{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, TimeoutMs: 1500, CorrelationId: 1 << 40, Partitions: []*quirev1.PartitionRecords{
			{Topic: "a", Partition: 0, Records: bytes.Repeat([]byte{1}, 100)},
			{Topic: "bé", Partition: 7, Records: bytes.Repeat([]byte{2}, 70000)},
			{Topic: "", Partition: -3},
		}},
	}
	for i, want := range reqs {
		raw, err := protobuf.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		// Split the message over several buffers, as gRPC hands it over.
		var data mem.BufferSlice
		for len(raw) > 0 {
			n := min(len(raw), 1000)
			data = append(data, mem.SliceBuffer(raw[:n]))
			raw = raw[n:]
		}
		got := &quirev1.ProduceRequest{CorrelationId: 5} // reset first
		if err := (serverCodec{}).Unmarshal(data, got); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if !protobuf.Equal(got, want) {
			t.Fatalf("%d: decoded %v, want %v", i, got, want)
		}
	}

	// Unknown field: proto keeps it; so must we (by falling back).
	raw, _ := protobuf.Marshal(reqs[1])
	raw = protowire.AppendTag(raw, 99, protowire.VarintType)
	raw = protowire.AppendVarint(raw, 1)
	var got, want quirev1.ProduceRequest
	if wire.DecodeProduceRequest(append([]byte(nil), raw...), &got) {
		t.Fatal("hand decoder took an unknown field")
	}
	if err := (serverCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, &got); err != nil {
		t.Fatal(err)
	}
	_ = protobuf.Unmarshal(raw, &want)
	if !protobuf.Equal(&got, &want) {
		t.Fatalf("fallback decoded %v, want %v", &got, &want)
	}

	// Invalid UTF-8 in a topic is an error, as with proto.
	bad := &quirev1.PartitionRecords{Records: []byte{1}}
	pw, _ := protobuf.Marshal(bad)
	pw = protowire.AppendTag(pw, 1, protowire.BytesType)
	pw = protowire.AppendBytes(pw, []byte{0xff})
	raw = protowire.AppendTag(nil, 3, protowire.BytesType)
	raw = protowire.AppendBytes(raw, pw)
	if err := (serverCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, &got); err == nil {
		t.Fatal("invalid UTF-8 topic accepted")
	}
}

// TestServerCodecProduceStreamMessage: the message ProduceStream receives
// into opens as its request, so the node's ACL check (broker/authz.go)
// sees what a ProduceRequest shows.
func TestServerCodecProduceStreamMessage(t *testing.T) {
	t.Parallel()
	m := &pooledProduce{req: quirev1.ProduceRequest{Partitions: []*quirev1.PartitionRecords{{Topic: "t"}}}}
	if req, ok := ProduceRequestOf(m); !ok || req != &m.req {
		t.Fatalf("ProduceRequestOf(pooledProduce) = %v, %v", req, ok)
	}
	if _, ok := ProduceRequestOf(&quirev1.FetchRequest{}); ok {
		t.Fatal("a FetchRequest opened as a produce request")
	}
}
