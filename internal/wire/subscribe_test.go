package wire

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// subscribeWant is the message RecordsEncoder stands for.
func subscribeWant(topic string, partition int32, batch, text bool, recs []Record, next int64) *quirev1.SubscribeResponse {
	pick := func(b []byte) (s string, bs []byte, isText bool) {
		if text && utf8.Valid(b) {
			return string(b), nil, true
		}
		return "", b, false
	}
	var headers = func(hs []Header) []*quirev1.RecordHeader {
		var out []*quirev1.RecordHeader
		for _, h := range hs {
			out = append(out, &quirev1.RecordHeader{Key: strings.ToValidUTF8(h.Key, "\uFFFD"), Value: h.Value})
		}
		return out
	}
	if batch {
		b := &quirev1.SubscribeBatch{Topic: topic, Partition: partition, NextOffset: next}
		for _, r := range recs {
			br := &quirev1.BatchRecord{Offset: r.Offset, TimestampMs: r.TimestampMs, LeaderEpoch: r.LeaderEpoch, Headers: headers(r.Headers)}
			if r.Key != nil {
				if s, bs, ok := pick(r.Key); ok {
					br.KeyData = &quirev1.BatchRecord_Key{Key: s}
				} else {
					br.KeyData = &quirev1.BatchRecord_KeyBytes{KeyBytes: bs}
				}
			}
			if r.Value != nil {
				if s, bs, ok := pick(r.Value); ok {
					br.ValueData = &quirev1.BatchRecord_Value{Value: s}
				} else {
					br.ValueData = &quirev1.BatchRecord_ValueBytes{ValueBytes: bs}
				}
			}
			b.Records = append(b.Records, br)
		}
		return &quirev1.SubscribeResponse{Event: &quirev1.SubscribeResponse_Batch{Batch: b}}
	}
	m := &quirev1.SubscribeRecords{}
	for _, r := range recs {
		cr := &quirev1.ConsumedRecord{Topic: topic, Partition: partition, Offset: r.Offset, TimestampMs: r.TimestampMs,
			LeaderEpoch: r.LeaderEpoch, Headers: headers(r.Headers)}
		if r.Key != nil {
			if s, bs, ok := pick(r.Key); ok {
				cr.KeyData = &quirev1.ConsumedRecord_Key{Key: s}
			} else {
				cr.KeyData = &quirev1.ConsumedRecord_KeyBytes{KeyBytes: bs}
			}
		}
		if r.Value != nil {
			if s, bs, ok := pick(r.Value); ok {
				cr.ValueData = &quirev1.ConsumedRecord_Value{Value: s}
			} else {
				cr.ValueData = &quirev1.ConsumedRecord_ValueBytes{ValueBytes: bs}
			}
		}
		m.Records = append(m.Records, cr)
	}
	return &quirev1.SubscribeResponse{Event: &quirev1.SubscribeResponse_Records{Records: m}}
}

// checkSubscribeEncoding encodes recs both ways and compares them with
// proto.Marshal of the messages they stand for, and each record's size
// with proto.Size.
func checkSubscribeEncoding(t *testing.T, topic string, partition int32, text bool, recs []Record) {
	t.Helper()
	next := int64(0)
	if len(recs) > 0 {
		next = recs[len(recs)-1].Offset + 1
	}
	for _, batch := range []bool{true, false} {
		for _, fencing := range []int32{0, 9, 1 << 20} {
			checkSubscribeMessage(t, topic, partition, batch, text, recs, next, fencing)
		}
	}
}

func checkSubscribeMessage(t *testing.T, topic string, partition int32, batch, text bool, recs []Record, next int64, fencing int32) {
	t.Helper()
	want := subscribeWant(topic, partition, batch, text, recs, next)
	if batch {
		want.GetBatch().FencingEpoch = fencing
	} else {
		want.GetRecords().FencingEpoch = fencing
	}
	wantBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var e RecordsEncoder
	e.Reset(make([]byte, 7, 64), topic, partition, batch, text)
	e.SetFencingEpoch(fencing)
	for i := range recs {
		r := recs[i]
		r.Headers = append([]Header(nil), r.Headers...)
		size := e.Append(&r)
		var wantSize int
		if batch {
			wantSize = proto.Size(want.GetBatch().Records[i])
		} else {
			wantSize = proto.Size(want.GetRecords().Records[i])
		}
		if size != wantSize {
			t.Fatalf("batch %v: record %d: size %d, proto.Size %d", batch, i, size, wantSize)
		}
	}
	if e.Records() != len(recs) {
		t.Fatalf("Records() %d, appended %d", e.Records(), len(recs))
	}
	head, body := e.Finish(next)
	got := append(bytes.Clone(head), body...)
	if !bytes.Equal(got, wantBytes) {
		t.Fatalf("batch %v: encoded\n%x\nproto\n%x", batch, got, wantBytes)
	}
	var back quirev1.SubscribeResponse
	if err := proto.Unmarshal(got, &back); err != nil || !proto.Equal(&back, want) {
		t.Fatalf("batch %v: decodes to %v (%v), want %v", batch, &back, err, want)
	}
}

func TestEncodeSubscribeRecords(t *testing.T) {
	v := bytes.Repeat([]byte("v"), 300)
	recs := []Record{
		{Offset: 0, TimestampMs: 0, Value: []byte("first")},
		{Offset: 1, TimestampMs: 1700000000000, LeaderEpoch: 3, Key: []byte("k"), Value: v},
		{Offset: 5, TimestampMs: -1, LeaderEpoch: -1, Key: []byte{}, Value: nil}, // empty key, tombstone
		{Offset: 6, Key: []byte{0xff, 0xfe}, Value: []byte("text")},              // bytes key, text value
		{Offset: 7, Key: []byte("text"), Value: []byte{0xc3}},                    // text key, bytes value
		{Offset: 1 << 40, Headers: []Header{{Key: "h", Value: []byte("x")}, {Key: "", Value: nil}, {Key: "bad\xffkey", Value: []byte{0}}}},
	}
	for _, text := range []bool{true, false} {
		checkSubscribeEncoding(t, "orders", 2, text, recs)
		checkSubscribeEncoding(t, "t", 0, text, recs[:1])
		checkSubscribeEncoding(t, "t", -3, text, nil)
	}
}

// FuzzEncodeSubscribe: one to four records from the fuzzer's values, the
// keys, values and headers null, empty or given as flags say, encoded as
// a batch and as SubscribeRecords: the bytes proto.Marshal writes.
func FuzzEncodeSubscribe(f *testing.F) {
	f.Add("a", int32(0), int64(0), int64(0), int32(0), []byte("k"), []byte("v"), "h", []byte("x"), uint16(0), uint8(1))
	f.Add("bé", int32(-3), int64(1<<40), int64(-1), int32(-1), []byte{0xff}, []byte{}, "\xff", []byte{}, uint16(0xffff), uint8(3))
	f.Add("c", int32(7), int64(9), int64(1700000000000), int32(5), []byte{}, []byte("é"), "", []byte(nil), uint16(0x5a5a), uint8(2))
	f.Fuzz(func(t *testing.T, topic string, partition int32, offset, ts int64, epoch int32, key, value []byte, hkey string, hval []byte, flags uint16, n uint8) {
		if !utf8.ValidString(topic) {
			t.Skip("topic names are UTF-8")
		}
		if offset < 0 {
			offset = -offset
		}
		var recs []Record
		for i := range int(n%4) + 1 {
			f := flags >> (4 * i)
			r := Record{Offset: offset + int64(i), TimestampMs: ts + int64(i), LeaderEpoch: epoch, Key: key, Value: value}
			if f&1 != 0 {
				r.Key = nil
			}
			if f&2 != 0 {
				r.Value = nil
			} else if r.Value == nil {
				r.Value = []byte{}
			}
			if f&4 != 0 {
				r.Headers = []Header{{Key: hkey, Value: hval}}
			}
			if f&8 != 0 {
				r.Headers = append(r.Headers, Header{Key: "second"})
			}
			recs = append(recs, r)
		}
		checkSubscribeEncoding(t, topic, partition, flags&1 == 0, recs)
	})
}

// A raw batch is written as proto.Marshal writes the same message, a
// negative partition and offsets included.
func TestRawBatchIsProtoEncoding(t *testing.T) {
	for _, r := range []RawBatch{
		{Topic: "orders", Partition: 2, Records: []byte("batches"), StartOffset: 13, NextOffset: 31},
		{Topic: "t", Partition: -1, Records: bytes.Repeat([]byte{1}, 300), StartOffset: 1 << 40, NextOffset: 1<<40 + 9},
		{Topic: "f", Partition: 1, Records: []byte("b"), StartOffset: 4, NextOffset: 5, FencingEpoch: 1 << 20},
	} {
		got := r.Append(nil)
		want, err := proto.Marshal(&quirev1.SubscribeResponse{Event: &quirev1.SubscribeResponse_RawBatch{RawBatch: &quirev1.SubscribeRawBatch{
			Topic: r.Topic, Partition: r.Partition, Records: r.Records, StartOffset: r.StartOffset, NextOffset: r.NextOffset,
			FencingEpoch: r.FencingEpoch}}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || r.Size() != len(want) {
			t.Fatalf("%+v: wrote %x (size %d), proto writes %x", r, got, r.Size(), want)
		}
	}
}
