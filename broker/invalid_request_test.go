package broker_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// wantPermanent checks that a whole call failed with code ec and a detail
// that does not invite a retry.
func wantPermanent(t *testing.T, what string, err error, ec quirev1.ErrorCode) {
	t.Helper()
	wantStatus(t, err, codes.InvalidArgument, ec)
	for _, d := range status.Convert(err).Details() {
		if e, ok := d.(*quirev1.Error); ok && e.Retriable {
			t.Errorf("%s: %v is marked retriable (%s)", what, e.Code, e.Message)
		}
	}
}

// TestErrorInvalidRequestsAreNotRetriable sends the requests that can never
// succeed (a partition below 0, one at or past the topic's count, an empty
// or malformed topic name) to each RPC that names a partition or a topic:
// every answer is a code that is not retriable, so a client that retries
// what is retriable stops at once. An unknown but well-formed topic is the
// one that stays retriable: it may yet be created.
func TestErrorInvalidRequestsAreNotRetriable(t *testing.T) {
	t.Parallel()
	_, c := start(t, noAutoCreate)
	ctx := ctxT(t)
	createTopic(t, c, "inv", 2, nil)
	groups := quirev1.NewGroupsClient(c.conn)
	batch := makeBatch(1, 10, "x")
	type target struct {
		topic     string
		partition int32
		want      quirev1.ErrorCode
	}
	bad := []target{
		{"inv", -1, quirev1.ErrorCode_INVALID_REQUEST},
		{"inv", 2, quirev1.ErrorCode_INVALID_REQUEST},
		{"inv", 1 << 30, quirev1.ErrorCode_INVALID_REQUEST},
		{"", 0, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION},
		{"no spaces", 0, quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION},
	}

	var pr []*quirev1.PartitionRecords
	var fp []*quirev1.FetchPartition
	var lp []*quirev1.ListOffsetsPartition
	var mp []*quirev1.FetchRecordsPartition
	for _, b := range bad {
		mp = append(mp, &quirev1.FetchRecordsPartition{Topic: b.topic, Partition: b.partition})
		pr = append(pr, &quirev1.PartitionRecords{Topic: b.topic, Partition: b.partition, Records: batch})
		fp = append(fp, &quirev1.FetchPartition{Topic: b.topic, Partition: b.partition})
		lp = append(lp, &quirev1.ListOffsetsPartition{Topic: b.topic, Partition: b.partition, TimestampMs: -1})
	}
	presp, err := c.producer.Produce(ctx, &quirev1.ProduceRequest{Partitions: pr})
	if err != nil {
		t.Fatal(err)
	}
	fresp, err := c.consumer.Fetch(ctx, &quirev1.FetchRequest{Partitions: fp})
	if err != nil {
		t.Fatal(err)
	}
	lresp, err := c.consumer.ListOffsets(ctx, &quirev1.ListOffsetsRequest{Partitions: lp})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bad {
		wantInline(t, presp.Partitions[i].Error, b.want, false)
		wantInline(t, fresp.Partitions[i].Error, b.want, false)
		wantInline(t, lresp.Partitions[i].Error, b.want, false)

		_, err := c.consumer.FetchRecords(ctx, &quirev1.FetchRecordsRequest{Topic: b.topic, Partition: b.partition})
		wantPermanent(t, "FetchRecords", err, b.want)
		rec := &quirev1.ProduceRecord{ValueData: &quirev1.ProduceRecord_Value{Value: "v"}}
		if b.topic == "inv" {
			rec.OptionalPartition = &quirev1.ProduceRecord_Partition{Partition: b.partition}
		}
		_, err = c.producer.ProduceRecords(ctx, &quirev1.ProduceRecordsRequest{Topic: b.topic, Records: []*quirev1.ProduceRecord{rec}})
		wantPermanent(t, "ProduceRecords", err, b.want)

		// The group offset calls, answered by the controller, say the same.
		_, err = groups.CommitOffsets(ctx, &quirev1.CommitOffsetsRequest{Group: "g",
			Offsets: []*quirev1.OffsetCommit{{Topic: b.topic, Partition: b.partition, Offset: 1}}})
		wantPermanent(t, "CommitOffsets", err, b.want)
		_, err = groups.FetchOffsets(ctx, &quirev1.FetchOffsetsRequest{Group: "g",
			Partitions: []*quirev1.TopicPartition{{Topic: b.topic, Partition: b.partition}}})
		wantPermanent(t, "FetchOffsets", err, b.want)
		if b.topic != "inv" {
			_, err = c.admin.DescribeProducers(ctx, &quirev1.DescribeProducersRequest{Topic: b.topic})
			wantPermanent(t, "DescribeProducers", err, b.want)
		}
	}
	mresp, err := c.consumer.FetchRecordsMulti(ctx, &quirev1.FetchRecordsMultiRequest{Partitions: mp})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bad {
		wantInline(t, mresp.Partitions[i].Error, b.want, false)
	}

	md, err := c.meta.GetMetadata(ctx, &quirev1.GetMetadataRequest{Topics: []string{"", "missing"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*quirev1.Error{}
	for _, tm := range md.Topics {
		got[tm.Name] = tm.Error
	}
	wantInline(t, got[""], quirev1.ErrorCode_INVALID_TOPIC_EXCEPTION, false)
	wantInline(t, got["missing"], quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, true)

	// Nothing of the refused requests was written.
	if n := leo(t, c, "inv", 0) + leo(t, c, "inv", 1); n != 0 {
		t.Fatalf("refused requests appended %d records", n)
	}
}
