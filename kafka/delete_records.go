package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// deleteRecords deletes, per partition, the records below an offset (-1:
// the high watermark) at the partition's leader, answering its new log
// start as the low watermark (kafka-delete-records.sh, the admin clients'
// DeleteRecords).
func deleteRecords(ctx context.Context, b Backend, req *kmsg.DeleteRecordsRequest) *kmsg.DeleteRecordsResponse {
	resp := kmsg.NewPtrDeleteRecordsResponse()
	in := &quirev1.DeleteRecordsRequest{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
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
