package wire

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// The decoders are differential against proto.Unmarshal: what a hand
// decoder takes, proto takes too and decodes to an equal message; what
// proto takes with no unknown fields, re-encoded as proto.Marshal writes
// it, the hand decoder takes (it falls back only for what it does not
// know). The encoders' bytes decode with proto.Unmarshal to the message
// they stand for.

// hasUnknown reports whether m or a message inside it kept unknown fields.
func hasUnknown(m protoreflect.Message) bool {
	if len(m.GetUnknown()) > 0 {
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := range l.Len() {
				found = found || hasUnknown(l.Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap():
			found = found || hasUnknown(v.Message())
		}
		return !found
	})
	return found
}

// differential checks decode (a hand decoder) against proto.Unmarshal on b.
func differential[M proto.Message](t *testing.T, b []byte, newMsg func() M, decode func([]byte, M) bool) {
	t.Helper()
	got, want := newMsg(), newMsg()
	err := proto.Unmarshal(b, want)
	if decode(bytes.Clone(b), got) {
		if err != nil {
			t.Fatalf("hand decoder took %x, proto refuses it: %v", b, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("%x: hand decoder %v, proto %v", b, got, want)
		}
	}
	if err != nil || hasUnknown(want.ProtoReflect()) {
		return
	}
	canon, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got = newMsg()
	if !decode(canon, got) {
		t.Fatalf("hand decoder falls back on proto's own encoding %x of %v", canon, want)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("%x: hand decoder %v, proto %v", canon, got, want)
	}
}

func seedMessages[M proto.Message](f *testing.F, msgs ...M) {
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		// The same with an unknown field, and cut short.
		f.Add(protowire.AppendVarint(protowire.AppendTag(bytes.Clone(b), 99, protowire.VarintType), 1))
		if len(b) > 1 {
			f.Add(b[:len(b)-1])
		}
	}
}

// FuzzDecodeProduceRequest decodes into a new message, and into one that
// held another request (as a stream's does): nothing of that one may show.
func FuzzDecodeProduceRequest(f *testing.F) {
	acks := int32(-1)
	full := &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, TimeoutMs: 1500, CorrelationId: 1 << 40, Partitions: []*quirev1.PartitionRecords{
		{Topic: "a", Partition: 0, Records: bytes.Repeat([]byte{1}, 100)},
		{Topic: "bé", Partition: 7, Records: []byte{2, 3}},
		{Topic: "", Partition: -3},
	}}
	seedMessages(f, &quirev1.ProduceRequest{}, full,
		&quirev1.ProduceRequest{Partitions: []*quirev1.PartitionRecords{{Topic: "a", Partition: 1}}})
	prev, err := proto.Marshal(full)
	if err != nil {
		f.Fatal(err)
	}
	if !DecodeProduceRequest(bytes.Clone(prev), &quirev1.ProduceRequest{}) {
		f.Fatal("the previous request does not decode")
	}
	used := func() *quirev1.ProduceRequest {
		m := &quirev1.ProduceRequest{}
		DecodeProduceRequest(bytes.Clone(prev), m) // checked above
		return m
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		differential(t, b, func() *quirev1.ProduceRequest { return &quirev1.ProduceRequest{} }, DecodeProduceRequest)
		differential(t, b, used, DecodeProduceRequest)
	})
}

func FuzzDecodeFetchResponse(f *testing.F) {
	seedMessages(f,
		&quirev1.FetchResponse{},
		&quirev1.FetchResponse{Partitions: []*quirev1.FetchPartitionResult{{}}},
		&quirev1.FetchResponse{Partitions: []*quirev1.FetchPartitionResult{
			{Topic: "a", Partition: 0, HighWatermark: 10, LogEndOffset: 12, Records: bytes.Repeat([]byte{1}, 100)},
			{Topic: "bé", Partition: -3, HighWatermark: -1, LogEndOffset: -1, LogStartOffset: -1,
				Error: &quirev1.Error{Code: quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER, Message: "moved", Retriable: true, LeaderId: 2}},
		}})
	f.Fuzz(func(t *testing.T, b []byte) {
		differential(t, b, func() *quirev1.FetchResponse { return &quirev1.FetchResponse{} }, DecodeFetchResponse)
	})
}

// fakeSource is a ProduceSource over plain slices that counts the bodies
// held and released.
type fakeSource struct {
	parts   []*quirev1.PartitionRecords // topic and partition only
	batches [][][2][]byte               // per partition: hdr, body
	held    counter
}

type counter struct{ held, put int }

func (c *counter) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (c *counter) Put(*[]byte)       { c.put++ }

func (s *fakeSource) Partitions() int { return len(s.parts) }
func (s *fakeSource) Partition(i int) (string, int32, int) {
	return s.parts[i].Topic, s.parts[i].Partition, len(s.batches[i])
}
func (s *fakeSource) Batch(i, j int) ([]byte, []byte) { return s.batches[i][j][0], s.batches[i][j][1] }
func (s *fakeSource) Hold(int, int) mem.BufferPool    { s.held.held++; return &s.held }

// FuzzEncodeProduce: partitions and batches cut from the fuzzer's bytes,
// bodies from a few bytes to past gRPC's pooling threshold (referenced
// rather than copied), encoded and decoded with proto.Unmarshal and with
// DecodeProduceRequest.
func FuzzEncodeProduce(f *testing.F) {
	f.Add(int64(7), int32(-1), true, int32(30000), "t,other", []byte("some records to cut into batches"), uint16(3000))
	f.Add(int64(0), int32(0), false, int32(0), "", []byte{}, uint16(0))
	f.Add(int64(-1), int32(1), true, int32(-5), ",,x", []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, uint16(70))
	f.Fuzz(func(t *testing.T, corr int64, acks int32, hasAcks bool, timeoutMs int32, topics string, data []byte, grow uint16) {
		if !utf8.ValidString(topics) {
			t.Skip("topics are UTF-8 (proto refuses anything else)")
		}
		src := &fakeSource{}
		want := &quirev1.ProduceRequest{TimeoutMs: timeoutMs, CorrelationId: corr}
		var ap *int32
		if hasAcks {
			ap = &acks
			want.OptionalAcks = &quirev1.ProduceRequest_Acks{Acks: acks}
		}
		r := data
		next := func(n int) []byte { // the next n bytes of data, round and round
			out := make([]byte, n)
			for i := range out {
				if len(r) == 0 {
					r = data
				}
				if len(r) == 0 {
					break
				}
				out[i], r = r[0]^byte(i>>8), r[1:]
			}
			return out
		}
		for pi, topic := range bytes.Split([]byte(topics), []byte(",")) {
			if len(topics) == 0 || pi >= 8 {
				break
			}
			p := &quirev1.PartitionRecords{Topic: string(topic), Partition: int32(pi*int(grow)) - 3}
			src.parts = append(src.parts, &quirev1.PartitionRecords{Topic: p.Topic, Partition: p.Partition})
			var bs [][2][]byte
			for j := range (pi + int(grow)) % 4 {
				hdr := next(1 + (j+int(grow))%61)
				body := next((int(grow) * (j + 1) * (pi + 1)) % 5000)
				bs = append(bs, [2][]byte{hdr, body})
				p.Records = append(append(p.Records, hdr...), body...)
			}
			src.batches = append(src.batches, bs)
			want.Partitions = append(want.Partitions, p)
		}
		enc := EncodeProduce(ap, timeoutMs, corr, src)
		wire := enc.Materialize()
		var got quirev1.ProduceRequest
		if err := proto.Unmarshal(wire, &got); err != nil {
			t.Fatalf("proto refuses the encoding %x: %v", wire, err)
		}
		if !proto.Equal(&got, want) {
			t.Fatalf("encoded %v, want %v", &got, want)
		}
		var hand quirev1.ProduceRequest
		if !DecodeProduceRequest(wire, &hand) || !proto.Equal(&hand, want) {
			t.Fatalf("hand decoder: %v, want %v", &hand, want)
		}
		enc.Free()
		if src.held.held != src.held.put {
			t.Fatalf("%d bodies held, %d released after Free", src.held.held, src.held.put)
		}
	})
}

// countingBuffers references the records as they are and counts the calls.
type countingBuffers struct{ buffers, inlined int }

func (c *countingBuffers) Buffer(_ int, records []byte) mem.Buffer {
	c.buffers++
	return mem.SliceBuffer(records)
}
func (c *countingBuffers) Inlined(int) { c.inlined++ }

// FuzzEncodeFetchResponse: responses of one to three partitions from the
// fuzzer's values, encoded by hand: the bytes proto.Marshal writes, and
// each partition with records either inlined or referenced, once.
func FuzzEncodeFetchResponse(f *testing.F) {
	f.Add("a", int32(0), int64(10), int64(12), int64(0), uint16(100), int32(0), "", uint8(1))
	f.Add("bé", int32(-3), int64(-1), int64(-1), int64(-1), uint16(0), int32(6), "moved", uint8(3))
	f.Add("c", int32(7), int64(1<<40), int64(1<<41), int64(5), uint16(9000), int32(0), "", uint8(2))
	f.Fuzz(func(t *testing.T, topic string, partition int32, hw, leo, lso int64, nrec uint16, code int32, msg string, n uint8) {
		if !utf8.ValidString(topic) || !utf8.ValidString(msg) {
			t.Skip("strings are UTF-8 (proto refuses anything else)")
		}
		resp := &quirev1.FetchResponse{}
		withRecords := 0
		for i := range int(n%3) + 1 {
			p := &quirev1.FetchPartitionResult{Topic: topic, Partition: partition + int32(i), HighWatermark: hw, LogEndOffset: leo >> i, LogStartOffset: lso}
			if k := int(nrec) * i % 10000; k > 0 {
				p.Records = bytes.Repeat([]byte{byte(i + 1)}, k)
				withRecords++
			}
			if code != 0 || msg != "" {
				p.Error = &quirev1.Error{Code: quirev1.ErrorCode(code), Message: msg, Retriable: i%2 == 0, LeaderId: partition}
			}
			resp.Partitions = append(resp.Partitions, p)
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		var bufs countingBuffers
		data, err := EncodeFetchResponse(resp, &bufs)
		if err != nil {
			t.Fatal(err)
		}
		got := data.Materialize()
		if !bytes.Equal(got, want) {
			t.Fatalf("encoded\n%x\nproto\n%x", got, want)
		}
		if bufs.buffers+bufs.inlined != withRecords {
			t.Fatalf("%d referenced and %d inlined of %d records sections", bufs.buffers, bufs.inlined, withRecords)
		}
		var back quirev1.FetchResponse
		if !DecodeFetchResponse(got, &back) || !proto.Equal(&back, resp) {
			t.Fatalf("hand decoder: %v, want %v", &back, resp)
		}
	})
}
