package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/internal/errcode"
	"github.com/quirelog/quire/replica"
)

// Routing: a plain gRPC client (grpcurl, a script) may send a unary
// Produce, ProduceRecords or FetchRecords to any broker of a cluster. A
// partition led elsewhere is passed on to its leader over the node-to-node
// connection, once: a request that was already passed on is answered
// NOT_LEADER_OR_FOLLOWER (with the leader's id) rather than passed on
// again, so two brokers with different views cannot bounce it. The
// pipelined APIs (ProduceStream, Fetch, FetchStream) are for clients that
// route themselves, and answer NOT_LEADER_OR_FOLLOWER.

// forwardedHeader marks a request a broker passed on; its value is that
// broker's id.
const forwardedHeader = "quire-forwarded-by"

// routeTo returns the address of the leader to pass a request on to when
// err says this broker does not lead the partition and ctx is a client's
// own request.
func (b *Broker) routeTo(ctx context.Context, err error) (string, bool) {
	var nle *replica.NotLeaderError
	if !errors.As(err, &nle) || nle.Leader < 0 || nle.Leader == b.cfg.NodeID {
		return "", false
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(forwardedHeader)) > 0 {
		return "", false
	}
	return b.cluster.brokerAddr(nle.Leader)
}

func (b *Broker) forwardContext(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, forwardedHeader, strconv.Itoa(int(b.cfg.NodeID)))
}

// forward is one partition's batches to pass on to its leader.
type forward struct {
	addr    string
	records []byte
	res     *quirev1.PartitionProduceResult
	notHere error // the NOT_LEADER answer, if the leader cannot be reached
}

// maybeForward queues res's partition for its leader if err says another
// broker leads it; it reports whether it did.
func (b *Broker) maybeForward(ctx context.Context, err error, records []byte, res *quirev1.PartitionProduceResult, fws *[]forward) bool {
	addr, ok := b.routeTo(ctx, err)
	if ok {
		*fws = append(*fws, forward{addr: addr, records: records, res: res, notHere: err})
	}
	return ok
}

// forwardMargin is how much sooner than the caller's deadline a leader is
// asked to give up waiting for acks, so that its REQUEST_TIMED_OUT (or
// success) comes back rather than the passed-on call timing out with the
// outcome unknown.
const forwardMargin = 250 * time.Millisecond

// runForwards passes the queued partitions on to their leaders, different
// partitions at once and parts for the same partition in request order,
// and fills in the leaders' answers: each is final (the leader has waited
// for acks). A leader that cannot be dialled leaves the NOT_LEADER answer
// (nothing was sent); a call that fails once sent is REQUEST_TIMED_OUT:
// the records may or may not have been appended, as after any timeout.
func (b *Broker) runForwards(ctx context.Context, fws []forward, acks int32) {
	type key struct {
		topic string
		part  int32
	}
	var order []key
	groups := map[key][]*forward{}
	for i := range fws {
		k := key{fws[i].res.Topic, fws[i].res.Partition}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], &fws[i])
	}
	var wg sync.WaitGroup
	for _, k := range order {
		wg.Go(func() {
			for _, fw := range groups[k] {
				b.forwardOne(ctx, fw, acks)
			}
		})
	}
	wg.Wait()
}

func (b *Broker) forwardOne(ctx context.Context, fw *forward, acks int32) {
	fw.res.BaseOffset, fw.res.LastOffset = -1, -1
	cc, err := b.cluster.peer(fw.addr)
	if err != nil {
		fw.res.Error = toError(fw.notHere)
		return
	}
	timeout := defaultProduceTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl)-forwardMargin, time.Millisecond)
	}
	resp, err := quirev1.NewProducerClient(cc).Produce(b.forwardContext(ctx), &quirev1.ProduceRequest{
		OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, TimeoutMs: int32(timeout.Milliseconds()),
		Partitions: []*quirev1.PartitionRecords{{Topic: fw.res.Topic, Partition: fw.res.Partition, Records: fw.records}},
	}, grpc.MaxCallRecvMsgSize(maxSendBytes))
	if err != nil {
		b.logger.Debug("a produce passed on to the leader got no answer", "topic", fw.res.Topic, "partition", fw.res.Partition,
			"leader", fw.addr, "error", err)
		fw.res.Error = toError(fmt.Errorf("%w: %s-%d: passed on to the leader at %s, no answer: %v",
			ErrRequestTimedOut, fw.res.Topic, fw.res.Partition, fw.addr, err))
		return
	}
	if acks == 0 {
		return // no offsets: nobody waited for them
	}
	if len(resp.Partitions) != 1 {
		fw.res.Error = toError(fmt.Errorf("broker: %s-%d: the leader at %s answered %d partitions",
			fw.res.Topic, fw.res.Partition, fw.addr, len(resp.Partitions)))
		return
	}
	got := resp.Partitions[0]
	fw.res.BaseOffset, fw.res.LastOffset = got.BaseOffset, got.LastOffset
	fw.res.LogAppendTimeMs, fw.res.LogStartOffset, fw.res.Error = got.LogAppendTimeMs, got.LogStartOffset, got.Error
}

// forwardFetchRecords passes a FetchRecords for a partition led elsewhere
// on to its leader and returns the leader's answer; forwarded is false
// when it is not to be passed on (or the leader cannot be dialled).
func (b *Broker) forwardFetchRecords(ctx context.Context, req *quirev1.FetchRecordsRequest, notHere error) (resp *quirev1.FetchRecordsResponse, forwarded bool, err error) {
	addr, ok := b.routeTo(ctx, notHere)
	if !ok {
		return nil, false, nil
	}
	cc, err := b.cluster.peer(addr)
	if err != nil {
		return nil, false, nil
	}
	resp, err = quirev1.NewConsumerClient(cc).FetchRecords(b.forwardContext(ctx), req, grpc.MaxCallRecvMsgSize(maxSendBytes))
	return resp, true, err
}

// listOffsetAnywhere is ListOffsets for one partition, asked of its
// leader wherever that is: -1 when no record has a timestamp at or after
// ts.
func (b *Broker) listOffsetAnywhere(ctx context.Context, topic string, part int32, ts int64) (int64, error) {
	lp := &quirev1.ListOffsetsPartition{Topic: topic, Partition: part, TimestampMs: ts}
	res := &quirev1.ListOffsetsResult{Offset: -1}
	if addr, ok := b.routeTo(ctx, b.ledElsewhere(topic, part)); ok {
		cc, err := b.cluster.peer(addr)
		if err != nil {
			return -1, err
		}
		resp, err := quirev1.NewConsumerClient(cc).ListOffsets(b.forwardContext(ctx), &quirev1.ListOffsetsRequest{Partitions: []*quirev1.ListOffsetsPartition{lp}})
		if err != nil {
			return -1, err
		}
		if len(resp.Partitions) != 1 {
			return -1, fmt.Errorf("broker: the leader at %s answered %d partitions for 1", addr, len(resp.Partitions))
		}
		res = resp.Partitions[0]
		if res.Error != nil {
			return -1, remoteError(res.Error)
		}
	} else if err := b.listOffset(ctx, lp, res); err != nil {
		return -1, err
	}
	return res.Offset, nil
}

// remoteError is a leader's inline error as a status error with the same
// details, so that it reaches the client with its own code.
func remoteError(e *quirev1.Error) error {
	code := codes.Internal
	for _, m := range errorTable {
		if m.code == e.Code {
			code = m.grpc
			break
		}
	}
	return errcode.Status(code, e)
}
