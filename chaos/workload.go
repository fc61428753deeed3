package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/client"
	"github.com/quirelog/quire/record"
)

// The workload: producers writing unique values with acks=all through
// plain unary Produce calls to any node (one call in flight each, no
// retries, so every outcome is what the cluster answered), readers tailing
// each partition with the Go client's consumer, and a poller of the high
// watermarks.

// definite are the codes a leader answers only before appending: a write
// refused with one of them did not happen. Every other failure leaves the
// outcome unknown.
var definite = map[quirev1.ErrorCode]bool{
	quirev1.ErrorCode_NOT_ENOUGH_REPLICAS:        true,
	quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION: true,
	quirev1.ErrorCode_LEADER_NOT_AVAILABLE:       true,
	quirev1.ErrorCode_INVALID_REQUEST:            true,
	quirev1.ErrorCode_CORRUPT_MESSAGE:            true,
	quirev1.ErrorCode_MESSAGE_TOO_LARGE:          true,
	quirev1.ErrorCode_INVALID_REQUIRED_ACKS:      true,
	quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION:    true,
	quirev1.ErrorCode_RECORD_LIST_TOO_LARGE:      true,
}

// definiteFailure reports whether an error says the write did not
// happen: a code a leader answers only before appending, and not marked
// outcome_unknown (appended, then not known to be committed: a leader
// whose ISR shrank below min.insync.replicas while it waited answers
// NOT_ENOUGH_REPLICAS so, and the records may yet be read).
func definiteFailure(e *quirev1.Error) bool {
	return definite[e.GetCode()] && !e.GetOutcomeUnknown()
}

// produceOutcome classifies a produce's answer: the offset on success,
// else whether the failure is definite.
func produceOutcome(resp *quirev1.ProduceResponse, err error) (offset int64, definiteFail bool, failure error) {
	if err != nil {
		if st, ok := status.FromError(err); ok {
			for _, d := range st.Details() {
				if e, ok := d.(*quirev1.Error); ok {
					return -1, definiteFailure(e), fmt.Errorf("%s: %s", e.GetCode(), e.GetMessage())
				}
			}
		}
		return -1, false, err
	}
	if len(resp.GetPartitions()) != 1 {
		return -1, false, fmt.Errorf("answer names %d partitions", len(resp.GetPartitions()))
	}
	pr := resp.GetPartitions()[0]
	if e := pr.GetError(); e != nil && e.GetCode() != quirev1.ErrorCode_NONE {
		return -1, definiteFailure(e), fmt.Errorf("%s: %s (outcome unknown: %v)", e.GetCode(), e.GetMessage(), e.GetOutcomeUnknown())
	}
	return pr.GetBaseOffset(), false, nil
}

// producer writes value after value, each to the next partition, sent to
// a node picked at random for each write.
func producer(ctx context.Context, h *History, name, topic string, partitions int32, conns []*grpc.ClientConn, rng *rand.Rand, pace time.Duration) {
	acks := int32(-1)
	bld := record.NewBuilder(record.None)
	for seq := 0; ctx.Err() == nil; seq++ {
		p := int32(seq) % partitions
		v := fmt.Sprintf("%s-%d", name, seq)
		bld.Reset()
		bld.Append(time.Now().UnixMilli(), nil, []byte(v), nil)
		batch := bld.Build()
		h.Add(Event{Kind: Send, Process: name, Partition: p, Value: v})
		rctx, cancel := context.WithTimeout(ctx, 6*time.Second)
		resp, err := quirev1.NewProducerClient(conns[rng.IntN(len(conns))]).Produce(rctx, &quirev1.ProduceRequest{
			OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: acks}, TimeoutMs: 4000, Partitions: []*quirev1.PartitionRecords{{Topic: topic, Partition: p, Records: batch}}})
		cancel()
		off, def, ferr := produceOutcome(resp, err)
		switch {
		case ferr == nil:
			h.Add(Event{Kind: Ack, Process: name, Partition: p, Offset: off, Value: v})
		case def:
			h.Add(Event{Kind: Fail, Process: name, Partition: p, Value: v, Error: ferr.Error()})
		default:
			h.Add(Event{Kind: Unknown, Process: name, Partition: p, Value: v, Error: ferr.Error()})
		}
		if ferr != nil || pace > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(max(pace, 20*time.Millisecond*time.Duration(boolInt(ferr != nil)))):
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reader tails one partition from offset 0 until ctx ends.
func reader(ctx context.Context, h *History, cl *client.Client, name, topic string, p int32) error {
	cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{topic: {p: client.At(0)}})
	if err != nil {
		return err
	}
	defer cons.Close()
	h.Add(Event{Kind: ReaderReset, Process: name, Partition: p})
	for ctx.Err() == nil {
		recs, err := cons.Poll(ctx)
		if err != nil && ctx.Err() == nil && len(recs) == 0 {
			// Reported and retried by the consumer; look again.
			continue
		}
		for _, r := range recs {
			h.Add(Event{Kind: Read, Process: name, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		}
	}
	return nil
}

// hwPoller records each partition's high watermark every interval, as
// one client sees it.
func hwPoller(ctx context.Context, h *History, cl *client.Client, topic string, every time.Duration) {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ends, err := cl.ListOffsets(rctx, topic, client.AtEnd())
		cancel()
		if err == nil {
			for p, o := range ends {
				h.Add(Event{Kind: HW, Process: "hw", Partition: p, Offset: o})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

// finalRead reads every partition from its log start offset (0, unless
// retention deleted records, which the checker reports) to its high
// watermark.
func finalRead(ctx context.Context, h *History, cl *client.Client, topic string, partitions int32) error {
	return readLogs(ctx, cl, topic, partitions, func(p int32, start int64) {
		h.Add(Event{Kind: LogStart, Partition: p, Offset: start})
	}, func(p int32, off int64, v string) {
		h.Add(Event{Kind: Final, Partition: p, Offset: off, Value: v})
	})
}

// readLogs reads every partition of topic from its log start offset
// (told to start) to its high watermark, calling fn with each record.
func readLogs(ctx context.Context, cl *client.Client, topic string, partitions int32,
	start func(p int32, start int64), fn func(p int32, off int64, v string)) error {
	starts, err := cl.ListOffsets(ctx, topic, client.AtStart())
	if err != nil {
		return fmt.Errorf("chaos: final read of %s: %w", topic, err)
	}
	ends, err := cl.ListOffsets(ctx, topic, client.AtEnd())
	if err != nil {
		return fmt.Errorf("chaos: final read of %s: %w", topic, err)
	}
	for p := range partitions {
		from, end := starts[p], ends[p]
		start(p, from)
		if end <= from {
			continue
		}
		cons, err := cl.NewConsumer(map[string]map[int32]client.Offset{topic: {p: client.At(from)}})
		if err != nil {
			return err
		}
		next := from
		for next < end {
			recs, err := cons.Poll(ctx)
			if ctx.Err() != nil {
				cons.Close()
				return fmt.Errorf("chaos: final read of %s/%d stopped at %d of %d: %w (last: %v)", topic, p, next, end, ctx.Err(), err)
			}
			for _, r := range recs {
				if r.Offset < end {
					fn(p, r.Offset, string(r.Value))
				}
				next = r.Offset + 1
			}
		}
		cons.Close()
	}
	return nil
}

// topicSegmentBytes is the workload topic's segment.bytes.
const topicSegmentBytes = 64 << 10

// dialAll opens a plain connection to each address.
func dialAll(addrs []string) ([]*grpc.ClientConn, error) {
	var out []*grpc.ClientConn
	for _, a := range addrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			for _, c := range out {
				c.Close()
			}
			return nil, err
		}
		out = append(out, cc)
	}
	return out, nil
}

// createTopic creates the workload's topic (RF 3, min.insync.replicas
// 2). Its segments are small, so that retention has segments to judge,
// and kept for a retention.ms four times the largest clock jump: a
// node's clock stepped forward is no reason to delete any record (the
// final read from offset 0, and the replicas compared, show one that
// is).
func createTopic(ctx context.Context, cl *client.Client, topic string, partitions int32) error {
	_, err := cl.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: partitions, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2", "segment.bytes": strconv.Itoa(topicSegmentBytes),
			"retention.ms": strconv.FormatInt((4 * MaxClockJump).Milliseconds(), 10)}})
	if client.ErrorCode(err) == quirev1.ErrorCode_TOPIC_ALREADY_EXISTS {
		return nil
	}
	return err
}
