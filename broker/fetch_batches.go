package broker

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/wire"
)

// fetchBatches reads partitions wherever they are led, as stored (the
// batches, not decoded), in one long poll as FetchRecordsMulti does:
// those led here from the log, into buffers from internal/fetchbuf (the
// caller gives them back: releaseFetchBufs, or the Subscribe stream's
// own release), the others with a Fetch passed on to
// their leaders. A partition whose leader cannot be asked is answered
// NOT_LEADER_OR_FOLLOWER; one whose call was ended because another leader
// answered first has no batches, to be read again from the same offset.
func (b *Broker) fetchBatches(ctx context.Context, specs []fetchSpec, wait time.Duration, maxBytes int) []fetchResult {
	split := b.splitByLeader(ctx, len(specs), func(i int) (string, int32) { return specs[i].Topic, specs[i].Partition })
	maxBytes = split.shareBytes(maxBytes)
	results := make([]fetchResult, len(specs))
	split.poll(ctx, wait, func(ctx context.Context, idx []int, wait time.Duration) bool {
		local := make([]fetchSpec, len(idx))
		for j, i := range idx {
			local[j] = specs[i]
		}
		found := false
		for j, r := range b.fetch(ctx, local, time.Time{}, wait, 1, maxBytes, true) {
			results[idx[j]] = r
			found = found || r.Err != nil || len(r.Records) > 0
		}
		return found
	}, func(ctx context.Context, addr string, idx []int, wait time.Duration) bool {
		return b.forwardFetch(ctx, addr, specs, idx, wait, maxBytes, results)
	})
	return results
}

// forwardFetch asks the leader at addr for the partitions at idx of
// specs with a Fetch and fills in their results; it reports whether any
// has batches or an error.
func (b *Broker) forwardFetch(ctx context.Context, addr string, specs []fetchSpec, idx []int, wait time.Duration, maxBytes int, results []fetchResult) bool {
	req := &quirev1.FetchRequest{MaxWaitMs: int32(wait.Milliseconds()), MinBytes: 1, MaxBytes: int32(maxBytes)}
	for _, i := range idx {
		s := specs[i]
		req.Partitions = append(req.Partitions, &quirev1.FetchPartition{Topic: s.Topic, Partition: s.Partition, Offset: s.Offset, MaxBytes: int32(s.MaxBytes)})
	}
	answerAll := func(errFor func(s fetchSpec) error) {
		for _, i := range idx {
			results[i] = fetchResult{FetchPartition: specs[i], HighWatermark: -1, LogEndOffset: -1, LogStartOffset: -1, Err: errFor(specs[i])}
		}
	}
	unreached := func(what string, err error) func(s fetchSpec) error {
		return func(s fetchSpec) error {
			return b.unreachedLeader(&quirev1.FetchRecordsPartition{Topic: s.Topic, Partition: s.Partition}, addr, what, err)
		}
	}
	cc, err := b.cluster.peer(addr)
	if err != nil {
		answerAll(unreached("cannot be reached", err))
		return true
	}
	callCtx, cancel := context.WithTimeout(ctx, wait+forwardFetchMargin)
	defer cancel()
	resp, err := quirev1.NewConsumerClient(cc).Fetch(b.forwardContext(callCtx), req,
		grpc.MaxCallRecvMsgSize(maxSendBytes), grpc.ForceCodecV2(peerFetchCodec{}))
	if err == nil && len(resp.Partitions) != len(idx) {
		err = fmt.Errorf("broker: the leader at %s answered %d partitions for %d", addr, len(resp.Partitions), len(idx))
	}
	if err != nil {
		if ctx.Err() != nil { // another leader answered first, or the caller left
			answerAll(func(fetchSpec) error { return nil })
			return false
		}
		b.logger.Debug("a fetch passed on to the leader got no answer", "leader", addr, "error", err)
		answerAll(unreached("did not answer", err))
		return true
	}
	found := false
	for j, i := range idx {
		p := resp.Partitions[j]
		r := fetchResult{FetchPartition: specs[i], Records: p.Records, HighWatermark: p.HighWatermark, LogEndOffset: p.LogEndOffset, LogStartOffset: p.LogStartOffset,
			Err: fromWire(p.Error)}
		results[i] = r
		found = found || r.Err != nil || len(r.Records) > 0
	}
	return found
}

// peerFetchCodec decodes a FetchResponse from another broker by hand
// (wire.DecodeFetchResponse), each partition's batches aliasing one copy
// of the message rather than copied out of it again; anything else goes
// through proto.
type peerFetchCodec struct{}

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
