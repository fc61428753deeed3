package client

import (
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/wire"
)

// Fetch responses are decoded by hand: gRPC hands the message over as a
// list of buffers it reuses once Unmarshal returns, so the message is
// copied once into a buffer of our own and each partition's records alias
// that copy. proto would copy the records a second time out of the
// message. The copy is fresh per response (never reused), as Records and
// PollFunc hand out keys and values aliasing it, valid for as long as the
// caller keeps them.

// fetchCodec decodes *quirev1.FetchResponse by hand and everything else
// with proto. It is forced on the fetch calls only.
type fetchCodec struct{}

func (fetchCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

func (fetchCodec) Unmarshal(data mem.BufferSlice, v any) error {
	resp, ok := v.(*quirev1.FetchResponse)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	buf := data.Materialize()
	if decodeFetchResponse(buf, resp) {
		return nil
	}
	return protobuf.Unmarshal(buf, resp)
}

func (fetchCodec) Name() string { return proto.Name }

var fetchCallOpt = grpc.ForceCodecV2(fetchCodec{})

// decodeFetchResponse decodes b into resp, aliasing b for the records. It
// reports false (resp then undefined) for anything but the fields of
// FetchResponse and FetchPartitionResult with their wire types.
func decodeFetchResponse(b []byte, resp *quirev1.FetchResponse) bool {
	protobuf.Reset(resp)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != wire.FetchPartitions || typ != protowire.BytesType {
			return false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		pr := &quirev1.FetchPartitionResult{}
		if !decodeFetchPartitionResult(v, pr) {
			return false
		}
		resp.Partitions = append(resp.Partitions, pr)
	}
	return true
}

func decodeFetchPartitionResult(b []byte, pr *quirev1.FetchPartitionResult) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case typ == protowire.VarintType && (num == wire.FetchPartition || num == wire.FetchHighWatermark || num == wire.FetchLogEndOffset || num == wire.FetchLogStartOffset):
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			switch num {
			case wire.FetchPartition:
				pr.Partition = int32(v)
			case wire.FetchHighWatermark:
				pr.HighWatermark = int64(v)
			case wire.FetchLogEndOffset:
				pr.LogEndOffset = int64(v)
			default:
				pr.LogStartOffset = int64(v)
			}
		case typ == protowire.BytesType && (num == wire.FetchTopic || num == wire.FetchError || num == wire.FetchRecords):
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			switch num {
			case wire.FetchTopic:
				if !utf8.Valid(v) {
					return false // proto reports invalid UTF-8
				}
				pr.Topic = string(v)
			case wire.FetchError:
				if pr.Error == nil {
					pr.Error = &quirev1.Error{}
				}
				if (protobuf.UnmarshalOptions{Merge: true}).Unmarshal(v, pr.Error) != nil {
					return false
				}
			default:
				if len(v) == 0 {
					pr.Records = nil // as proto: an empty bytes field is nil
				} else {
					pr.Records = v[:len(v):len(v)]
				}
			}
		default:
			return false
		}
	}
	return true
}
