package broker

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/wire"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/storage"
)

// Fetch has the leader read partitions with a Fetch over the node-to-node
// connection (request.Forwarder).
func (f coreForwarder) Fetch(ctx context.Context, leader int32, req *request.FetchRequest) ([]request.FetchResult, error) {
	cc, addr, err := f.conn(leader)
	if err != nil {
		return nil, err
	}
	in := &quirev1.FetchRequest{MaxWaitMs: int32(req.MaxWait.Milliseconds()), MinBytes: int32(req.MinBytes), MaxBytes: int32(req.MaxBytes),
		IsolationLevel: quirev1.IsolationLevel(req.Isolation)}
	for _, p := range req.Partitions {
		in.Partitions = append(in.Partitions, &quirev1.FetchPartition{Topic: p.Topic, Partition: p.Partition, Offset: p.Offset, MaxBytes: int32(p.MaxBytes)})
	}
	resp, err := quirev1.NewConsumerClient(cc).Fetch(f.b.forwardContext(ctx), in,
		grpc.MaxCallRecvMsgSize(request.MaxSendBytes), grpc.ForceCodecV2(peerFetchCodec{}))
	if err != nil {
		if ctx.Err() == nil {
			f.b.logger.Debug("a fetch passed on to the leader got no answer", "leader", addr, "error", err)
		}
		return nil, err
	}
	out := make([]request.FetchResult, len(resp.Partitions))
	for i, p := range resp.Partitions {
		out[i] = request.FetchResult{Records: p.Records, HighWatermark: p.HighWatermark, LogEndOffset: p.LogEndOffset, LogStartOffset: p.LogStartOffset,
			LastStableOffset: p.LastStableOffset, Err: service.FromError(p.Error)}
		for _, a := range p.AbortedTransactions {
			out[i].Aborted = append(out[i].Aborted, storage.AbortedTxn{ProducerID: a.ProducerId, FirstOffset: a.FirstOffset})
		}
	}
	return out, nil
}

// peerFetchCodec decodes a FetchResponse from another broker by hand
// (wire.DecodeFetchResponse), each partition's batches aliasing one copy
// of the message rather than copied out of it again; anything else goes
// through proto.
type peerFetchCodec struct{}

var protoCodec = encoding.GetCodecV2(proto.Name)

func (peerFetchCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

func (peerFetchCodec) Unmarshal(data mem.BufferSlice, v any) error {
	resp, ok := v.(*quirev1.FetchResponse)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	buf := data.Materialize() // our own copy: gRPC reuses data's buffers
	if wire.DecodeFetchResponse(buf, resp) {
		return nil
	}
	return protobuf.Unmarshal(buf, resp)
}

func (peerFetchCodec) Name() string { return proto.Name }
