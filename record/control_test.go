package record

import (
	"errors"
	"testing"
)

func TestControlMarkerRoundTrip(t *testing.T) {
	for _, m := range []Marker{{ControlCommit, 7}, {ControlAbort, 0}, {ControlAbort, -1}} {
		b := BuildMarker(42, 3, m, 1000)
		h, err := ValidateDeep(b)
		if err != nil {
			t.Fatalf("marker %+v does not validate: %v", m, err)
		}
		if !h.Control() || !h.Transactional() || h.ProducerID != 42 || h.ProducerEpoch != 3 ||
			h.BaseSequence != -1 || h.NumRecords != 1 {
			t.Fatalf("marker header %+v", h)
		}
		got, err := ParseMarker(b)
		if err != nil || got != m {
			t.Fatalf("ParseMarker = %+v, %v; want %+v", got, err, m)
		}
	}
}

// TestControlMarkerKafkaBytes pins the record key and value to Kafka's
// layout: key version 0 and type, value version 0 and coordinator epoch.
func TestControlMarkerKafkaBytes(t *testing.T) {
	b := BuildMarker(1, 0, Marker{ControlCommit, 0x01020304}, 5)
	var key, value []byte
	if err := ForEachRecord(b, func(r *Record) error {
		key, value = append([]byte(nil), r.Key...), append([]byte(nil), r.Value...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if string(key) != "\x00\x00\x00\x01" || string(value) != "\x00\x00\x01\x02\x03\x04" {
		t.Fatalf("key % x value % x", key, value)
	}
}

func TestControlParseRefusesDataAndUnknownTypes(t *testing.T) {
	b := NewBuilder(None)
	b.Append(1, []byte("k"), []byte("v"), nil)
	if _, err := ParseMarker(b.Build()); !errors.Is(err, ErrBadControl) {
		t.Fatalf("data batch: %v", err)
	}
	bad := BuildMarker(1, 0, Marker{Type: 5}, 1)
	if _, err := ParseMarker(bad); !errors.Is(err, ErrBadControl) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("type 5: %v", err)
	}
}

// FuzzParseMarker: any bytes either parse to a marker that builds back
// to the same type and epoch, or fail with ErrCorrupt; never a panic.
func FuzzParseMarker(f *testing.F) {
	f.Add(BuildMarker(1, 2, Marker{ControlCommit, 3}, 4))
	f.Add(BuildMarker(1, 2, Marker{ControlAbort, -1}, 4))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMarker(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if m.Type != ControlAbort && m.Type != ControlCommit {
			t.Fatalf("parsed type %d", m.Type)
		}
	})
}

// TestSetDeleteHorizon: a marker stamped with a delete horizon still
// validates (CRC recomputed), reads as the same marker, and reports the
// horizon; an unstamped one reports none.
func TestSetDeleteHorizon(t *testing.T) {
	b := BuildMarker(42, 3, Marker{ControlAbort, 5}, 1000)
	h, _ := ParseHeader(b)
	if _, ok := h.DeleteHorizon(); ok {
		t.Fatal("a new marker has a delete horizon")
	}
	SetDeleteHorizon(b, 987654321)
	h, err := Validate(b)
	if err != nil {
		t.Fatalf("stamped marker does not validate: %v", err)
	}
	if hz, ok := h.DeleteHorizon(); !ok || hz != 987654321 {
		t.Fatalf("delete horizon %d, %v", hz, ok)
	}
	if !h.Control() || !h.Transactional() || h.ProducerID != 42 || h.MaxTimestamp != 1000 {
		t.Fatalf("stamped marker header %+v", h)
	}
	if m, err := ParseMarker(b); err != nil || m != (Marker{ControlAbort, 5}) {
		t.Fatalf("ParseMarker = %+v, %v", m, err)
	}
}
