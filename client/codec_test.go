package client

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// TestEncodeProduceIsProto checks that encodeProduce produces the bytes
// protobuf decodes into the request the batches stand for, for small
// (copied) and large (referenced) record sections, and that the record
// buffers count as held until gRPC frees them.
func TestEncodeProduceIsProto(t *testing.T) {
	t.Parallel()
	mk := func(n, size int) *pbatch {
		b := &pbatch{b: record.NewBuilder(record.None)}
		for i := 0; i < n; i++ {
			b.b.Append(int64(i), nil, bytes.Repeat([]byte{byte(i)}, size), nil)
		}
		b.build()
		return b
	}
	ir := &inflightReq{
		parts:   []*prodPart{{topic: "t", partition: 0}, {topic: "other", partition: 7}},
		batches: [][]*pbatch{{mk(1, 3)}, {mk(100, 100), mk(2, 10), mk(50, 200)}},
	}
	acks := int32(-1)
	enc := encodeProduce(&acks, 30000, 99, ir)
	var got quirev1.ProduceRequest
	if err := proto.Unmarshal(enc.data.Materialize(), &got); err != nil {
		t.Fatal(err)
	}
	want := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, TimeoutMs: 30000, CorrelationId: 99}
	for i, bs := range ir.batches {
		var recs []byte
		for _, b := range bs {
			recs = append(recs, b.b.Build()...)
		}
		want.Partitions = append(want.Partitions, &quirev1.PartitionRecords{Topic: ir.parts[i].topic, Partition: ir.parts[i].partition, Records: recs})
	}
	if !proto.Equal(&got, want) {
		t.Fatalf("decoded %v\nwant %v", &got, want)
	}
	for _, pr := range got.Partitions {
		if err := record.SplitBatches(pr.Records, func([]byte, record.Header) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	held := func() (n int32) {
		for _, bs := range ir.batches {
			for _, b := range bs {
				n += b.held.n.Load()
			}
		}
		return n
	}
	if h := held(); h != 2 {
		t.Fatalf("%d record buffers held, want the 2 large ones", h)
	}
	enc.data.Free()
	if h := held(); h != 0 {
		t.Fatalf("%d record buffers still held after Free", h)
	}
}
