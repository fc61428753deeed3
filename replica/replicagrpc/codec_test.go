package replicagrpc

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/internal/bufpool"
)

// replicaAnswers are answers of every shape: no partitions, records of
// none, a few bytes and many (inlined and referenced), refusals, a
// divergence.
func replicaAnswers() []*pb.ReplicaFetchResponse {
	big := bytes.Repeat([]byte{7}, 100<<10)
	return []*pb.ReplicaFetchResponse{
		{},
		{Session: true},
		{Partitions: []*pb.ReplicaFetchPartitionResult{{Topic: "t", HighWatermark: 5, LogEndOffset: 9}}},
		{Partitions: []*pb.ReplicaFetchPartitionResult{{Topic: "t", HighWatermark: 5, LogEndOffset: 9, Records: []byte("r")}}, Session: true},
		{Partitions: []*pb.ReplicaFetchPartitionResult{
			{Topic: "a", Partition: 3, HighWatermark: 100, LogStartOffset: 2, LogEndOffset: 120, Records: []byte("small")},
			{Topic: "b", Partition: 1, ErrorCode: 6, ErrorMessage: "not the leader"},
			{Topic: "c", Partition: 2, DivergingEpoch: &pb.EpochEndOffset{Epoch: 4, EndOffset: 77}},
			{Topic: "d", HighWatermark: 1 << 40, LogEndOffset: 1<<40 + 5, Records: big},
		}},
	}
}

// The leader's encoding, read back by proto, is the answer; the
// follower's decoding of proto's encoding is the answer, its records
// aliasing what was received.
func TestReplicaCodecRoundTrip(t *testing.T) {
	t.Parallel()
	for i, want := range replicaAnswers() {
		// Records in pooled buffers, as HandleFetch reads them.
		m := &Answer{msg: protobuf.Clone(want).(*pb.ReplicaFetchResponse)}
		for _, pr := range m.msg.Partitions {
			var buf *[]byte
			if len(pr.Records) > 0 {
				buf = bufpool.Shared.Get(len(pr.Records))
				copy(*buf, pr.Records)
				pr.Records = *buf
			}
			m.bufs = append(m.bufs, buf)
		}
		data, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		enc := data.Materialize()
		data.Free()
		got := &pb.ReplicaFetchResponse{}
		if err := protobuf.Unmarshal(enc, got); err != nil {
			t.Fatalf("answer %d: proto refuses the encoding: %v", i, err)
		}
		if !protobuf.Equal(got, want) {
			t.Fatalf("answer %d: encoded %v, want %v", i, got, want)
		}
		for j, b := range m.bufs {
			if b != nil {
				t.Fatalf("answer %d: partition %d's buffer kept by the message, not handed on", i, j)
			}
		}

		wire, err := protobuf.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		dec := &pb.ReplicaFetchResponse{}
		if !decodeReplicaFetch(wire, dec) {
			t.Fatalf("answer %d: decoder falls back on proto's encoding", i)
		}
		if !protobuf.Equal(dec, want) {
			t.Fatalf("answer %d: decoded %v, want %v", i, dec, want)
		}
		for _, pr := range dec.Partitions {
			if len(pr.Records) > 0 && !aliases(pr.Records, wire) {
				t.Fatalf("answer %d: records of %s copied, not aliased", i, pr.Topic)
			}
		}

		// Through gRPC's buffers, as a follower receives it: a few
		// frames' worth of buffers.
		var frames mem.BufferSlice
		for rest := wire; len(rest) > 0; {
			n := min(len(rest), 16384)
			frames = append(frames, mem.SliceBuffer(rest[:n]))
			rest = rest[n:]
		}
		ans := &pooledAnswer{}
		if err := (peerCodec{}).Unmarshal(frames, ans); err != nil {
			t.Fatal(err)
		}
		if !protobuf.Equal(&ans.msg, want) {
			t.Fatalf("answer %d: received %v, want %v", i, &ans.msg, want)
		}
		ans.release()
	}
}

func aliases(part, whole []byte) bool {
	for i := range whole {
		if &whole[i] == &part[0] {
			return true
		}
	}
	return false
}

// FuzzDecodeReplicaFetch: what the hand decoder takes, proto takes and
// decodes to an equal message; it takes whatever proto.Marshal writes.
func FuzzDecodeReplicaFetch(f *testing.F) {
	for _, m := range replicaAnswers() {
		b, err := protobuf.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(protowire.AppendVarint(protowire.AppendTag(bytes.Clone(b), 99, protowire.VarintType), 1))
		if len(b) > 3 {
			f.Add(b[:len(b)-3])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &pb.ReplicaFetchResponse{}
		err := protobuf.Unmarshal(b, want)
		got := &pb.ReplicaFetchResponse{}
		if decodeReplicaFetch(bytes.Clone(b), got) {
			if err != nil {
				t.Fatalf("decoder took %x, proto refuses it: %v", b, err)
			}
			if !protobuf.Equal(got, want) {
				t.Fatalf("%x: decoder %v, proto %v", b, got, want)
			}
		}
		if err != nil || len(want.ProtoReflect().GetUnknown()) > 0 {
			return
		}
		canon, err := protobuf.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got = &pb.ReplicaFetchResponse{}
		if !decodeReplicaFetch(canon, got) || !protobuf.Equal(got, want) {
			t.Fatalf("%x: decoder refuses or differs on proto's encoding %x of %v: %v", b, canon, want, got)
		}
	})
}
