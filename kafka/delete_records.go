package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// deleteRecords deletes, per partition, the records below an offset (-1:
// the high watermark) at the partition's leader, answering the low
// watermark once the in-sync replicas have followed, within the request's
// timeout (kafka-delete-records.sh, the admin clients' DeleteRecords). As
// Kafka, an offset below -1 is OFFSET_OUT_OF_RANGE for its partition
// alone; a partition named again is answered as the first time.
func deleteRecords(ctx context.Context, b Backend, req *kmsg.DeleteRecordsRequest) *kmsg.DeleteRecordsResponse {
	resp := kmsg.NewPtrDeleteRecordsResponse()
	in := &request.DeleteRecordsRequest{Timeout: time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond, Route: true}
	sent := map[partKey]int{} // index in in.Partitions
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := partKey{t.Topic, p.Partition}
			if _, dup := sent[k]; p.Offset < -1 || dup {
				continue
			}
			sent[k] = len(in.Partitions)
			in.Partitions = append(in.Partitions, request.DeleteRecordsPartition{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset})
		}
	}
	var results []request.DeleteRecordsResult
	var code int16
	if len(in.Partitions) > 0 {
		var err error
		results, err = b.DeleteRecords(ctx, in)
		code, _ = coreError(err)
		if err == nil && len(results) != len(in.Partitions) {
			code = kerr.UnknownServerError.Code
		}
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
			pcode := code
			if pcode == 0 {
				r := results[sent[partKey{t.Topic, p.Partition}]]
				if pcode, _ = coreError(r.Err); pcode == 0 {
					rp.LowWatermark = r.LowWatermark
				}
			}
			rp.ErrorCode = pcode
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
