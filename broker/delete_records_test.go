package broker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/storage"
)

// DeleteRecords moves each partition's log start up to the offset asked
// (-1: the high watermark): reads below it are OFFSET_OUT_OF_RANGE and the
// earliest offset is the new start. Partition problems come back per
// partition, the others still done; a malformed request fails whole.
func TestAdminDeleteRecords(t *testing.T) {
	t.Parallel()
	b, c := start(t)
	createTopic(t, c, "dr", 2, nil)
	createTopic(t, c, "dr2", 1, nil)
	produce(t, c, "dr", 0, makeBatch(10, 10, "a"))
	produce(t, c, "dr", 1, makeBatch(4, 10, "b"))
	produce(t, c, "dr2", 0, makeBatch(3, 10, "c"))

	resp, err := c.admin.DeleteRecords(ctxT(t), &quirev1.DeleteRecordsRequest{Partitions: []*quirev1.DeleteRecordsPartition{
		{Topic: "dr", Partition: 0, Offset: 6},
		{Topic: "dr", Partition: 1, Offset: -1},
		{Topic: "dr", Partition: 2, Offset: 0},
		{Topic: "nope", Partition: 0, Offset: 0},
		{Topic: "dr2", Partition: 0, Offset: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rs := resp.GetPartitions()
	if len(rs) != 5 {
		t.Fatalf("%d results for 5 partitions: %v", len(rs), rs)
	}
	for i, want := range []int64{6, 4} {
		if r := rs[i]; r.GetError() != nil || r.GetLowWatermark() != want || r.GetTopic() != "dr" || r.GetPartition() != int32(i) {
			t.Fatalf("dr-%d: %v, want low watermark %d", i, r, want)
		}
	}
	wantInline(t, rs[2].GetError(), quirev1.ErrorCode_INVALID_REQUEST, false)
	wantInline(t, rs[3].GetError(), quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, true)
	wantInline(t, rs[4].GetError(), quirev1.ErrorCode_OFFSET_OUT_OF_RANGE, false)
	for _, r := range rs[2:] {
		if r.GetLowWatermark() != -1 {
			t.Fatalf("a refused partition has low watermark %d: %v", r.GetLowWatermark(), r)
		}
	}

	_, err = c.consumer.FetchRecords(ctxT(t), &quirev1.FetchRecordsRequest{Topic: "dr", Partition: 0, Offset: 5})
	wantStatus(t, err, codes.OutOfRange, quirev1.ErrorCode_OFFSET_OUT_OF_RANGE)
	fr, err := c.consumer.FetchRecords(ctxT(t), &quirev1.FetchRecordsRequest{Topic: "dr", Partition: 0, Offset: 6})
	if err != nil {
		t.Fatal(err)
	}
	if recs := fr.GetRecords(); len(recs) != 4 || recs[0].GetOffset() != 6 || fr.GetLogStartOffset() != 6 {
		t.Fatalf("fetch from the new start: %d records, first %v, log start %d", len(recs), recs, fr.GetLogStartOffset())
	}
	lo, err := c.consumer.ListOffsets(ctxT(t), &quirev1.ListOffsetsRequest{Partitions: []*quirev1.ListOffsetsPartition{{Topic: "dr", Partition: 0, TimestampMs: -2}}})
	if err != nil || lo.GetPartitions()[0].GetOffset() != 6 {
		t.Fatalf("earliest offset after the deletion: %v, %v", lo, err)
	}

	// The new start is in the log-start checkpoint when the call answers.
	ckpt, err := os.ReadFile(filepath.Join(b.Config().DataDir, storage.LogStartCheckpointFile))
	if err != nil || !strings.Contains(string(ckpt), "\ndr 0 6\n") || !strings.Contains(string(ckpt), "\ndr 1 4\n") {
		t.Fatalf("log-start checkpoint after DeleteRecords: %q, %v", ckpt, err)
	}

	del := func(ps ...*quirev1.DeleteRecordsPartition) error {
		_, err := c.admin.DeleteRecords(ctxT(t), &quirev1.DeleteRecordsRequest{Partitions: ps})
		return err
	}
	wantStatus(t, del(), codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "no partitions")
	wantStatus(t, del(&quirev1.DeleteRecordsPartition{Topic: "dr", Offset: 1}, &quirev1.DeleteRecordsPartition{Topic: "dr", Offset: 2}),
		codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "dr-0 is named twice")
	wantStatus(t, del(&quirev1.DeleteRecordsPartition{Topic: "dr", Partition: 1, Offset: -2}),
		codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "offset -2")
	_, err = c.admin.DeleteRecords(ctxT(t), &quirev1.DeleteRecordsRequest{Partitions: []*quirev1.DeleteRecordsPartition{{Topic: "dr"}}, TimeoutMs: -1})
	wantStatus(t, err, codes.InvalidArgument, quirev1.ErrorCode_INVALID_REQUEST, "timeout_ms -1 is negative")
}
