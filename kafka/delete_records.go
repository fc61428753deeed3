package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// deleteRecords deletes, per partition, the records below an offset (-1:
// the high watermark) at the partition's leader, answering the low
// watermark once the in-sync replicas have followed, within the request's
// timeout (kafka-delete-records.sh, the admin clients' DeleteRecords). As
// Kafka, an offset below -1 is OFFSET_OUT_OF_RANGE for its partition
// alone; a partition named again is answered as the first time.
func deleteRecords(ctx context.Context, b Backend, req *kmsg.DeleteRecordsRequest) *kmsg.DeleteRecordsResponse {
	resp := kmsg.NewPtrDeleteRecordsResponse()
	in := &quirev1.DeleteRecordsRequest{TimeoutMs: max(req.TimeoutMillis, 0)}
	sent := map[partKey]bool{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := partKey{t.Topic, p.Partition}
			if p.Offset < -1 || sent[k] {
				continue
			}
			sent[k] = true
			in.Partitions = append(in.Partitions, &quirev1.DeleteRecordsPartition{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset})
		}
	}
	var results partResults[*quirev1.DeleteRecordsResult]
	if len(in.Partitions) > 0 {
		out, err := b.DeleteRecords(ctx, in)
		results = collect(out.GetPartitions(), err)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = p.Partition, -1
			if p.Offset < -1 {
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			r, code, _ := results.of(t.Topic, p.Partition)
			if code == 0 {
				rp.LowWatermark = r.LowWatermark
			}
			rp.ErrorCode = code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
