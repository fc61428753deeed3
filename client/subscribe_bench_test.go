package client_test

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// A Subscribe reader for BenchmarkGroupConsume/subscribe-wire that does
// what the partition consumer's PollFunc does with fetched batches: one
// copy of each message, then every record's fields walked in place (keys
// and values alias the copy), with no message decoded per record, as a
// client in a language whose protobuf runtime decodes lazily or into an
// arena would. It shows the broker's and the transport's cost apart from
// Go's generated decoder.

// rawMessage is a message kept as received.
type rawMessage struct{ b []byte }

// rawCodec keeps a *rawMessage as received; anything else goes through
// proto.
type rawCodec struct{}

var benchProtoCodec = encoding.GetCodecV2(proto.Name)

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) { return benchProtoCodec.Marshal(v) }

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*rawMessage); ok {
		m.b = data.Materialize()
		return nil
	}
	return benchProtoCodec.Unmarshal(data, v)
}

func (rawCodec) Name() string { return proto.Name }

// wireRecord is a record walked in place.
type wireRecord struct {
	offset, timestampMs int64
	leaderEpoch         int32
	key, value          []byte
}

var errWire = errors.New("bad wire bytes")

// walkSubscribeResponse calls onBatch with a SubscribeBatch's topic,
// partition and next offset after calling onRecord for each of its
// records; an assignment is decoded into assignment (left nil for a
// batch).
func walkSubscribeResponse(b []byte, onRecord func(*wireRecord), onBatch func(topic string, p int32, next int64)) (assignment *quirev1.SubscribeAssignment, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return nil, errWire
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, errWire
		}
		b = b[n:]
		switch num {
		case 1:
			assignment = &quirev1.SubscribeAssignment{}
			if err := protobuf.Unmarshal(v, assignment); err != nil {
				return nil, err
			}
		case 3:
			if err := walkBatch(v, onRecord, onBatch); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("event %d: %w", num, errWire)
		}
	}
	return assignment, nil
}

func walkBatch(b []byte, onRecord func(*wireRecord), onBatch func(string, int32, int64)) error {
	var topic string
	var part int32
	var next int64
	var r wireRecord
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errWire
		}
		b = b[n:]
		switch {
		case num == 3 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errWire
			}
			b = b[n:]
			r = wireRecord{}
			if err := walkRecord(v, &r); err != nil {
				return err
			}
			onRecord(&r)
		case typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errWire
			}
			b = b[n:]
			if num == 1 {
				topic = string(v)
			}
		case typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errWire
			}
			b = b[n:]
			switch num {
			case 2:
				part = int32(v)
			case 4:
				next = int64(v)
			}
		default:
			return errWire
		}
	}
	onBatch(topic, part, next)
	return nil
}

func walkRecord(b []byte, r *wireRecord) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errWire
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errWire
			}
			b = b[n:]
			switch num {
			case 3:
				r.offset = int64(v)
			case 4:
				r.timestampMs = int64(v)
			case 10:
				r.leaderEpoch = int32(v)
			}
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errWire
			}
			b = b[n:]
			switch num {
			case 5, 7:
				r.key = v
			case 6, 8:
				r.value = v
			}
		default:
			return errWire
		}
	}
	return nil
}
