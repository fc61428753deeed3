package record

import (
	"encoding/binary"
	"fmt"
)

// ControlType is the type of a control record (Kafka's ControlRecordType):
// the end-of-transaction markers a transaction coordinator has written to
// each partition of a transaction.
type ControlType int16

// Control record types, numbered as Kafka numbers them.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "abort"
	case ControlCommit:
		return "commit"
	}
	return fmt.Sprintf("control(%d)", int16(t))
}

// ErrBadControl is a control batch whose record is not a transaction
// marker this package knows.
var ErrBadControl = fmt.Errorf("%w: bad control record", ErrCorrupt)

// Marker is an end-of-transaction marker: the control record of a control
// batch.
type Marker struct {
	Type ControlType
	// CoordinatorEpoch is the epoch of the coordinator that wrote it, so
	// that a partition refuses markers from a deposed coordinator.
	CoordinatorEpoch int32
}

// BuildMarker returns a control batch (transactional and control bits
// set, no compression, base sequence -1) holding one end-of-transaction
// marker for producer id/epoch, timestamped ts. Its layout is Kafka's:
// the record key is version (int16, 0) and type (int16), the value is
// version (int16, 0) and the coordinator epoch (int32).
func BuildMarker(producerID int64, producerEpoch int16, m Marker, ts int64) []byte {
	var key [4]byte
	binary.BigEndian.PutUint16(key[2:], uint16(m.Type))
	var value [6]byte
	binary.BigEndian.PutUint32(value[2:], uint32(m.CoordinatorEpoch))
	b := NewBuilder(None)
	b.SetProducer(producerID, producerEpoch, -1)
	b.attrs = AttrTransactional | AttrControl
	b.Append(ts, key[:], value[:], nil)
	return b.Build()
}

// ParseMarker returns the marker of a control batch. A control batch of
// a type other than abort or commit, or not holding exactly one record,
// gets ErrBadControl.
func ParseMarker(batch []byte) (Marker, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return Marker{}, err
	}
	if !h.Control() {
		return Marker{}, fmt.Errorf("%w: batch at %d is not a control batch", ErrBadControl, h.BaseOffset)
	}
	var m Marker
	n := 0
	err = ForEachRecord(batch, func(r *Record) error {
		n++
		if len(r.Key) < 4 {
			return fmt.Errorf("%w: key of %d bytes", ErrBadControl, len(r.Key))
		}
		if v := int16(binary.BigEndian.Uint16(r.Key)); v != 0 {
			return fmt.Errorf("%w: key version %d", ErrBadControl, v)
		}
		m.Type = ControlType(binary.BigEndian.Uint16(r.Key[2:]))
		if m.Type != ControlAbort && m.Type != ControlCommit {
			return fmt.Errorf("%w: type %d", ErrBadControl, int16(m.Type))
		}
		if len(r.Value) >= 6 {
			m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
		}
		return nil
	})
	if err != nil {
		return Marker{}, err
	}
	if n != 1 {
		return Marker{}, fmt.Errorf("%w: %d records", ErrBadControl, n)
	}
	return m, nil
}
