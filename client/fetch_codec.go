package client

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/wire"
)

// Fetch responses are decoded by hand (wire.DecodeFetchResponse): gRPC
// hands the message over as a list of buffers it reuses once Unmarshal
// returns, so the message is copied once into a buffer of our own and each
// partition's records alias that copy. proto would copy the records a second time out of the
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
	if wire.DecodeFetchResponse(buf, resp) {
		return nil
	}
	return protobuf.Unmarshal(buf, resp)
}

func (fetchCodec) Name() string { return proto.Name }

var fetchCallOpt = grpc.ForceCodecV2(fetchCodec{})
