package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/record"
)

// The two doors are adapters over one request core: the same produce,
// fetch, list-offsets and delete-records cases, run through gRPC and
// through Kafka's protocol each on a topic of its own, answer the same
// offsets, the same records byte for byte and the same error codes (a
// quire.v1 ErrorCode is Kafka's number for the codes these meet).

// doorOp is one step of a case.
type doorOp struct {
	op        string // produce, fetch, list, delete; and doors_admin_test.go's
	partition int32
	arg       int64 // fetch: offset; list: timestamp; delete: offset; produce: records (0: a corrupt batch)
}

// doorAnswer is what a door answered a step. On an error only the code
// is compared: each protocol has its own convention for the other fields
// then (Kafka's fetch answers a high watermark of -1, quire.v1's the
// partition's).
type doorAnswer struct {
	code    int32
	offset  int64 // base offset, high watermark, offset or low watermark
	records []byte
}

func (a doorAnswer) String() string {
	return fmt.Sprintf("code %d offset %d, %d bytes of records", a.code, a.offset, len(a.records))
}

// door runs steps on one topic.
type door interface {
	run(t *testing.T, ctx context.Context, topic string, s doorOp) doorAnswer
}

// doorBatch is n records, the same bytes every time; 0 is a batch whose
// CRC does not match.
func doorBatch(n int64) []byte {
	bld := record.NewBuilder(record.None)
	for i := range max(n, 2) {
		bld.Append(1_700_000_000_000+i, []byte(fmt.Sprintf("k%d", i)), []byte(fmt.Sprintf("value %d", i)), nil)
	}
	b := bld.Build()
	if n == 0 {
		b[len(b)-1] ^= 0xff
	}
	return b
}

type grpcDoor struct{ c *clients }

// grpcCode is the code of a whole call's status, or of an inline error.
func grpcCode(t *testing.T, err error, inline *quirev1.Error) int32 {
	t.Helper()
	if err != nil {
		for _, d := range status.Convert(err).Details() {
			if e, ok := d.(*quirev1.Error); ok {
				return int32(e.Code)
			}
		}
		t.Fatalf("a status without a quire.v1.Error: %v", err)
	}
	if inline != nil {
		return int32(inline.Code)
	}
	return 0
}

func (g grpcDoor) run(t *testing.T, ctx context.Context, topic string, s doorOp) doorAnswer {
	if a, ok := g.runAdmin(t, ctx, topic, s); ok {
		return a
	}
	switch s.op {
	case "produce":
		resp, err := g.c.producer.Produce(ctx, &quirev1.ProduceRequest{OptionalAcks: &quirev1.ProduceRequest_Acks{Acks: -1},
			Partitions: []*quirev1.PartitionRecords{{Topic: topic, Partition: s.partition, Records: doorBatch(s.arg)}}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		p := resp.Partitions[0]
		return doorAnswer{code: grpcCode(t, nil, p.Error), offset: p.BaseOffset}
	case "fetch":
		resp, err := g.c.consumer.Fetch(ctx, &quirev1.FetchRequest{Partitions: []*quirev1.FetchPartition{{Topic: topic, Partition: s.partition, Offset: s.arg}}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		p := resp.Partitions[0]
		return doorAnswer{code: grpcCode(t, nil, p.Error), offset: p.HighWatermark, records: p.Records}
	case "list":
		resp, err := g.c.consumer.ListOffsets(ctx, &quirev1.ListOffsetsRequest{Partitions: []*quirev1.ListOffsetsPartition{{Topic: topic, Partition: s.partition, TimestampMs: s.arg}}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		p := resp.Partitions[0]
		return doorAnswer{code: grpcCode(t, nil, p.Error), offset: p.Offset}
	case "delete":
		resp, err := g.c.admin.DeleteRecords(ctx, &quirev1.DeleteRecordsRequest{Partitions: []*quirev1.DeleteRecordsPartition{{Topic: topic, Partition: s.partition, Offset: s.arg}}})
		if err != nil {
			return doorAnswer{code: grpcCode(t, err, nil), offset: -1}
		}
		p := resp.Partitions[0]
		return doorAnswer{code: grpcCode(t, nil, p.Error), offset: p.LowWatermark}
	}
	t.Fatalf("unknown step %q", s.op)
	return doorAnswer{}
}

// kafkaDoor sends Kafka's requests as they are to the broker, not
// through the client's partitioning (which would refuse some of the
// cases before sending them).
type kafkaDoor struct{ cl *kgo.Client }

func (k kafkaDoor) send(t *testing.T, ctx context.Context, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := k.cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp
}

func (k kafkaDoor) run(t *testing.T, ctx context.Context, topic string, s doorOp) doorAnswer {
	if a, ok := k.runAdmin(t, ctx, topic, s); ok {
		return a
	}
	switch s.op {
	case "produce":
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 8, -1, 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = s.partition, doorBatch(s.arg)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := k.send(t, ctx, req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		return doorAnswer{code: int32(p.ErrorCode), offset: p.BaseOffset}
	case "fetch":
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes, req.SessionEpoch = 11, -1, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = s.partition, s.arg, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := k.send(t, ctx, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		return doorAnswer{code: int32(p.ErrorCode), offset: p.HighWatermark, records: p.RecordBatches}
	case "list":
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID = 4, -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = s.partition, s.arg, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := k.send(t, ctx, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		return doorAnswer{code: int32(p.ErrorCode), offset: p.Offset}
	case "delete":
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version, req.TimeoutMillis = 1, 30000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = s.partition, s.arg
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := k.send(t, ctx, req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
		return doorAnswer{code: int32(p.ErrorCode), offset: p.LowWatermark}
	}
	t.Fatalf("unknown step %q", s.op)
	return doorAnswer{}
}

func TestDoorsAnswerAlike(t *testing.T) {
	t.Parallel()
	b, addr := startKafkaBroker(t)
	c := dial(t, b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	doors := map[string]door{"grpc": grpcDoor{c}, "kafka": kafkaDoor{cl}}
	const (
		none          = 0
		outOfRange    = int32(quirev1.ErrorCode_OFFSET_OUT_OF_RANGE)
		corrupt       = int32(quirev1.ErrorCode_CORRUPT_MESSAGE)
		unknownTopic  = int32(quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION)
		invalidReq    = int32(quirev1.ErrorCode_INVALID_REQUEST)
		exists        = int32(quirev1.ErrorCode_TOPIC_ALREADY_EXISTS)
		invalidParts  = int32(quirev1.ErrorCode_INVALID_PARTITIONS)
		invalidConfig = int32(quirev1.ErrorCode_INVALID_CONFIG)
		latest        = -1
		earliest      = -2
		noSuchTopicOp = -100 // a partition of a topic that does not exist
	)
	type step struct {
		doorOp
		code   int32
		offset int64
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"produce, read, list, delete", []step{
			{doorOp{"produce", 0, 3}, none, 0},
			{doorOp{"produce", 0, 2}, none, 3},
			{doorOp{"produce", 1, 4}, none, 0},
			{doorOp{"fetch", 0, 0}, none, 5},
			{doorOp{"fetch", 0, 3}, none, 5},
			{doorOp{"fetch", 1, 0}, none, 4},
			{doorOp{"list", 0, latest}, none, 5},
			{doorOp{"list", 0, earliest}, none, 0},
			{doorOp{"delete", 0, 3}, none, 3},
			{doorOp{"list", 0, earliest}, none, 3},
			{doorOp{"fetch", 0, 0}, outOfRange, 5},
			{doorOp{"delete", 1, -1}, none, 4},
			{doorOp{"fetch", 1, 4}, none, 4},
		}},
		{"refused", []step{
			{doorOp{"produce", 0, 0}, corrupt, -1},
			{doorOp{"produce", 7, 1}, invalidReq, -1},
			{doorOp{"fetch", 0, 9}, outOfRange, 0},
			{doorOp{"fetch", 7, 0}, invalidReq, -1},
			{doorOp{"list", 7, latest}, invalidReq, -1},
			{doorOp{"delete", 0, 9}, outOfRange, -1},
			{doorOp{"delete", 7, 0}, invalidReq, -1},
			{doorOp{"fetch", noSuchTopicOp, 0}, unknownTopic, -1},
			{doorOp{"list", noSuchTopicOp, latest}, unknownTopic, -1},
			{doorOp{"delete", noSuchTopicOp, 0}, unknownTopic, -1},
		}},
		{"topic and config administration", []step{
			{doorOp{"create", 0, 3}, exists, -1},
			{doorOp{"partitions", 0, 2}, invalidParts, 0},
			{doorOp{"partitions", 0, 3}, none, 0},
			{doorOp{"meta", 0, 0}, none, 3},
			{doorOp{"produce", 2, 2}, none, 0},
			{doorOp{"alter", 0, 5000}, none, 0},
			{doorOp{"configs", 0, 0}, none, 5000},
			{doorOp{"alter", 0, -1}, invalidConfig, 0},
			{doorOp{"configs", 0, 0}, none, 5000},
			{doorOp{"deletetopic", 0, 0}, none, 0},
			{doorOp{"configs", 0, 0}, unknownTopic, -1},
			{doorOp{"meta", 0, 0}, unknownTopic, -1},
			{doorOp{"deletetopic", 0, 0}, unknownTopic, 0},
			{doorOp{"create", 0, -5}, invalidParts, -1},
			{doorOp{"create", 0, 4}, none, 4},
			{doorOp{"partitions", noSuchTopicOp, 5}, unknownTopic, 0},
			{doorOp{"alter", noSuchTopicOp, 1}, unknownTopic, 0},
			{doorOp{"create", noSuchTopicOp, 1}, none, 1},
			{doorOp{"create", noSuchTopicOp, 1}, exists, -1},
		}},
	}
	ctx := ctxT(t)
	for i, tc := range cases {
		answers := map[string][]doorAnswer{}
		for name, d := range doors {
			topic := fmt.Sprintf("doors-%d-%s", i, name)
			createTopic(t, c, topic, 2, nil)
			for _, s := range tc.steps {
				op, on := s.doorOp, topic
				if op.partition == noSuchTopicOp {
					op.partition, on = 0, topic+"-missing"
				}
				answers[name] = append(answers[name], d.run(t, ctx, on, op))
			}
		}
		for j, s := range tc.steps {
			g, k := answers["grpc"][j], answers["kafka"][j]
			if g.code != k.code || g.code == none && (g.offset != k.offset || !bytes.Equal(g.records, k.records)) {
				t.Errorf("%s, step %d (%+v): gRPC answered %v, Kafka %v", tc.name, j, s.doorOp, g, k)
			}
			if g.code != s.code || g.code == none && g.offset != s.offset {
				t.Errorf("%s, step %d (%+v): answered %v, want code %d offset %d", tc.name, j, s.doorOp, g, s.code, s.offset)
			}
			if s.op == "fetch" && s.code == none && s.offset > s.arg && len(g.records) == 0 {
				t.Errorf("%s, step %d (%+v): no records", tc.name, j, s.doorOp)
			}
		}
	}
}
