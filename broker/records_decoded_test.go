package broker_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// plainCase is one key/value shape sent through ProduceRecords: null is
// nil, and text says which field of the pair carried it.
type plainCase struct {
	name             string
	key, value       []byte
	keyText, valText bool
}

var plainCases = []plainCase{
	{name: "text", key: []byte("k"), value: []byte("hello"), keyText: true, valText: true},
	{name: "bytes", key: []byte{0xff, 0x00}, value: []byte{0x80, 0x81, 0x00}},
	{name: "utf8 as bytes", key: []byte("kb"), value: []byte("looks like text")},
	{name: "null value", key: []byte("gone"), value: nil, keyText: true},
	{name: "empty text value", key: nil, value: []byte{}, valText: true},
	{name: "empty bytes value", key: []byte{}, value: []byte{}},
	{name: "empty text key", key: []byte{}, value: []byte("v"), keyText: true, valText: true},
	{name: "null key and value", key: nil, value: nil},
}

func (c plainCase) record() *quirev1.ProduceRecord {
	r := &quirev1.ProduceRecord{OptionalPartition: &quirev1.ProduceRecord_Partition{Partition: 0}}
	switch {
	case c.key == nil:
	case c.keyText:
		r.KeyData = &quirev1.ProduceRecord_Key{Key: string(c.key)}
	default:
		r.KeyData = &quirev1.ProduceRecord_KeyBytes{KeyBytes: c.key}
	}
	switch {
	case c.value == nil:
	case c.valText:
		r.ValueData = &quirev1.ProduceRecord_Value{Value: string(c.value)}
	default:
		r.ValueData = &quirev1.ProduceRecord_ValueBytes{ValueBytes: c.value}
	}
	return r
}

// consumedKey returns a decoded key as bytes, nil for null, and whether it
// came as text.
func consumedKey(r *quirev1.ConsumedRecord) ([]byte, bool) {
	switch k := r.KeyData.(type) {
	case *quirev1.ConsumedRecord_Key:
		return []byte(k.Key), true
	case *quirev1.ConsumedRecord_KeyBytes:
		return nonNil(k.KeyBytes), false
	}
	return nil, false
}

func consumedValue(r *quirev1.ConsumedRecord) ([]byte, bool) {
	switch v := r.ValueData.(type) {
	case *quirev1.ConsumedRecord_Value:
		return []byte(v.Value), true
	case *quirev1.ConsumedRecord_ValueBytes:
		return nonNil(v.ValueBytes), false
	}
	return nil, false
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func sameNullable(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func TestRecordsPlainRoundTrip(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "plain", 1, nil)
	var recs []*quirev1.ProduceRecord
	for _, pc := range plainCases {
		recs = append(recs, pc.record())
	}
	resp, err := c.producer.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: "plain", Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if r.Error != nil || r.Offset != int64(i) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}

	// The log holds Kafka nulls (length -1) for unset pairs and empty
	// fields for "": what any Kafka reader of the batches sees.
	raw, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{{Topic: "plain"}}})
	if err != nil || raw.Partitions[0].Error != nil {
		t.Fatalf("fetch: %v %v", raw, err)
	}
	i := 0
	for buf := raw.Partitions[0].Records; len(buf) > 0; {
		h, err := record.ParseHeader(buf)
		if err != nil {
			t.Fatal(err)
		}
		if err := record.ForEachRecord(buf[:h.Size()], func(r *record.Record) error {
			pc := plainCases[i]
			if !sameNullable(r.Key, pc.key) || !sameNullable(r.Value, pc.value) {
				t.Errorf("%s: stored key %q (nil %v) value %q (nil %v), want %q (nil %v) / %q (nil %v)", pc.name,
					r.Key, r.Key == nil, r.Value, r.Value == nil, pc.key, pc.key == nil, pc.value, pc.value == nil)
			}
			i++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		buf = buf[h.Size():]
	}
	if i != len(plainCases) {
		t.Fatalf("stored %d records, want %d", i, len(plainCases))
	}

	for _, format := range []quirev1.RecordFormat{quirev1.RecordFormat_RECORD_FORMAT_AUTO, quirev1.RecordFormat_RECORD_FORMAT_BYTES} {
		fr, err := c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "plain", Format: format})
		if err != nil {
			t.Fatal(err)
		}
		if len(fr.Records) != len(plainCases) {
			t.Fatalf("%v: %d records, want %d", format, len(fr.Records), len(plainCases))
		}
		for i, pc := range plainCases {
			r := fr.Records[i]
			k, kText := consumedKey(r)
			v, vText := consumedValue(r)
			if !sameNullable(k, pc.key) || !sameNullable(v, pc.value) {
				t.Errorf("%v %s: read key %q value %q (%+v)", format, pc.name, k, v, r)
			}
			// AUTO: text exactly when the bytes are valid UTF-8 (so
			// bytes that look like text come back as text); BYTES: never.
			auto := format == quirev1.RecordFormat_RECORD_FORMAT_AUTO
			if pc.key != nil && kText != (auto && utf8.Valid(pc.key)) {
				t.Errorf("%v %s: key as text %v", format, pc.name, kText)
			}
			if pc.value != nil && vText != (auto && utf8.Valid(pc.value)) {
				t.Errorf("%v %s: value as text %v", format, pc.name, vText)
			}
		}
	}
}

// In JSON (grpcurl), a tombstone leaves "value" out while an empty value
// shows "value": "", also with grpcurl's -emit-defaults.
func TestRecordsPlainJSON(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	ctx := ctxT(t)
	createTopic(t, c, "plainjson", 1, nil)
	var req quirev1.ProduceRecordsRequest
	in := `{"topic": "plainjson", "records": [{"key": "a", "value": "x"}, {"key": "a"}, {"key": "a", "value": ""}, {"valueBytes": "/wA="}]}`
	if err := protojson.Unmarshal([]byte(in), &req); err != nil {
		t.Fatal(err)
	}
	if _, err := c.producer.ProduceRecords(ctx, &req); err != nil {
		t.Fatal(err)
	}
	fr, err := c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: "plainjson"})
	if err != nil || len(fr.Records) != 4 {
		t.Fatalf("fetch: %v %v", fr, err)
	}
	for _, opts := range []protojson.MarshalOptions{{}, {EmitUnpopulated: true}} {
		var out []string
		for _, r := range fr.Records {
			r.TimestampMs, r.LeaderEpoch = 0, 0
			b, err := opts.Marshal(&quirev1.ConsumedRecord{KeyData: r.KeyData, ValueData: r.ValueData})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, strings.ReplaceAll(string(b), " ", ""))
		}
		for i, want := range []string{`"key":"a","value":"x"`, `"key":"a"`, `"key":"a","value":""`, `"valueBytes":"/wA="`} {
			if !strings.Contains(out[i], want) {
				t.Errorf("emit defaults %v, record %d: %s, want %s", opts.EmitUnpopulated, i, out[i], want)
			}
		}
		if strings.Contains(out[1], `"value"`) {
			t.Errorf("emit defaults %v: a tombstone shows a value: %s", opts.EmitUnpopulated, out[1])
		}
	}

	// Both fields of a pair at once is a mistake JSON rejects.
	if err := protojson.Unmarshal([]byte(`{"records": [{"value": "x", "valueBytes": "eA=="}]}`), &req); err == nil {
		t.Fatal("value and valueBytes together accepted")
	}
}

func TestRecordsPlainUnknownFormat(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	createTopic(t, c, "plainfmt", 1, nil)
	_, err := c.consumer.FetchRecords(ctxT(t), &quirev1.FetchRecordsRequest{Topic: "plainfmt", Format: 7})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "record format 7")
}
