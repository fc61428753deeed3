package client

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// DeleteBelowHighWatermark, as an offset of DeleteRecords, deletes
// everything consumers can read now.
const DeleteBelowHighWatermark int64 = -1

// DeletedRecords is one partition's outcome of DeleteRecords.
type DeletedRecords struct {
	Partition int32 `json:"partition"`
	// LowWatermark is the lowest log start offset over the partition's
	// in-sync replicas after the deletion; -1 with Err.
	LowWatermark int64 `json:"low_watermark"`
	// Err is why the partition's records were not deleted.
	Err error `json:"-"`
}

// DeleteRecords deletes a topic's records below an offset in each
// partition of before (Kafka's DeleteRecords): the partition's log start
// moves up to the offset on every in-sync replica before the answer, reads
// below it fail with OFFSET_OUT_OF_RANGE and its segments wholly below it
// leave the disk. An offset of
// DeleteBelowHighWatermark deletes all the partition holds up to its high
// watermark; one above the high watermark is refused. The results come in
// partition order. A partition whose leader moved meanwhile is asked
// again until ctx (or the client's request timeout) ends; an unknown
// topic is not. An empty before, or a negative offset other than -1,
// fails the call.
func (c *Client) DeleteRecords(ctx context.Context, topic string, before map[int32]int64) ([]DeletedRecords, error) {
	if len(before) == 0 {
		return nil, fmt.Errorf("client: DeleteRecords of %s names no partitions", topic)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.requestTimeout)
		defer cancel()
	}
	out := make([]DeletedRecords, 0, len(before))
	for p := range before {
		out = append(out, DeletedRecords{Partition: p, LowWatermark: -1})
	}
	slices.SortFunc(out, func(a, b DeletedRecords) int { return cmp.Compare(a.Partition, b.Partition) })
	todo := make([]int, len(out)) // indexes into out still to ask
	for i := range out {
		todo[i] = i
	}
	backoff := c.cfg.retryBackoff
	for first := true; ; first = false {
		// The leaders' wait for the in-sync replicas ends before the
		// call's deadline, so that it is answered per partition.
		req := &quirev1.DeleteRecordsRequest{}
		if d, ok := ctx.Deadline(); ok {
			req.TimeoutMs = int32(max(time.Until(d).Milliseconds()*9/10, 1))
		}
		for _, i := range todo {
			req.Partitions = append(req.Partitions, &quirev1.DeleteRecordsPartition{Topic: topic, Partition: out[i].Partition, Offset: before[out[i].Partition]})
		}
		var resp *quirev1.DeleteRecordsResponse
		err := c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) (err error) {
			resp, err = a.DeleteRecords(ctx, req)
			return err
		})
		if err == nil && len(resp.GetPartitions()) != len(todo) {
			err = fmt.Errorf("client: DeleteRecords answered %d partitions for %d", len(resp.GetPartitions()), len(todo))
		}
		if err != nil {
			if first {
				return nil, err // nothing done yet
			}
			// A later call: the partitions done before stand.
			for _, i := range todo {
				out[i].Err = err
			}
			return out, nil
		}
		var again []int
		for k, r := range resp.GetPartitions() {
			i := todo[k]
			out[i].LowWatermark, out[i].Err = r.GetLowWatermark(), fromProto(r.GetError())
			// Leadership moving is worth waiting out; a topic that
			// does not exist (a typo, most likely) is not.
			if retriable(out[i].Err) && ErrorCode(out[i].Err) != quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
				again = append(again, i)
			}
		}
		if len(again) == 0 || c.sleepCtx(ctx, backoff) != nil {
			return out, nil
		}
		todo, backoff = again, min(2*backoff, time.Second)
	}
}
