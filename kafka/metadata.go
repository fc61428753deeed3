package kafka

import (
	"context"
	"encoding/base64"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// metadata answers which brokers there are (on this listener) and who
// leads each partition. All topics when the request names none: a null
// list, or in version 0 an empty one.
func metadata(ctx context.Context, b Backend, req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
	in := &request.MetadataRequest{AllowAutoTopicCreation: req.AllowAutoTopicCreation || req.Version < 4}
	var byID []kmsg.MetadataResponseTopic // named by id only: not served
	var internal []string                 // Kafka's internal topics, never auto-created
	if !all {
		for _, t := range req.Topics {
			if t.Topic == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID, mt.ErrorCode = t.TopicID, kerr.UnknownTopicID.Code
				byID = append(byID, mt)
				continue
			}
			if internalTopic(*t.Topic) && in.AllowAutoTopicCreation {
				internal = append(internal, *t.Topic)
				continue
			}
			in.Topics = append(in.Topics, *t.Topic)
		}
	}
	if len(internal) > 0 {
		// Looked up first without auto-creation: one that exists (made
		// by hand) is asked for and answered as any other.
		var missing []string
		in.Topics, missing = existingTopics(ctx, b, in.Topics, internal)
		defer func() {
			for _, name := range missing {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.ErrorCode = kmsg.StringPtr(name), kerr.UnknownTopicOrPartition.Code
				resp.Topics = append(resp.Topics, mt)
			}
		}()
	}
	// Asked for no topic by name (an empty list, or ids only): the backend
	// is asked for all, for the brokers, and its topics are left out.
	wantTopics := all || len(in.Topics) > 0
	out, err := b.Metadata(ctx, in)
	if err != nil {
		code, _ := coreError(err)
		for _, name := range in.Topics {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = kmsg.StringPtr(name), code
			resp.Topics = append(resp.Topics, mt)
		}
		resp.Topics = append(resp.Topics, byID...)
		return resp
	}
	resp.ClusterID = kmsg.StringPtr(out.ClusterID)
	resp.ControllerID = out.ControllerID
	for _, br := range out.Brokers {
		e, ok := kafkaEndpoint(br.ID, br.Addr, br.Rack)
		if !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = e.id, e.host, e.port, e.rack
		resp.Brokers = append(resp.Brokers, mb)
	}
	listed := map[int32]bool{}
	for _, br := range resp.Brokers {
		listed[br.NodeID] = true
	}
	for _, t := range out.Topics {
		if !wantTopics {
			break
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(t.Info.Name)
		if t.Err != nil {
			mt.ErrorCode, _ = coreError(t.Err)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		mt.TopicID = topicID(t.Info.ID)
		for _, p := range t.Info.Partitions {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.LeaderEpoch = p.Partition, p.Leader, p.LeaderEpoch
			mp.Replicas, mp.ISR = p.Replicas, p.ISR
			if mp.Replicas == nil {
				mp.Replicas = []int32{}
			}
			if mp.ISR == nil {
				mp.ISR = []int32{}
			}
			mp.OfflineReplicas = []int32{}
			switch {
			case p.Leader < 0:
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			case !listed[p.Leader]:
				// Its leader has no address on this listener (or is
				// fenced): Kafka's answer, retriable.
				mp.ErrorCode = kerr.ListenerNotFound.Code
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	resp.Topics = append(resp.Topics, byID...)
	return resp
}

// internalTopic reports whether name is one of Kafka's internal topics,
// which clients and tools name in metadata requests (to find the
// coordinators' partitions, or to list them apart). Quire keeps groups'
// offsets in its metadata log and has no transactions, so none exists;
// auto-creating one as an ordinary, empty topic would mislead whoever
// asked: such a name is answered UNKNOWN_TOPIC_OR_PARTITION, as a
// Kafka cluster whose internal topics do not exist yet answers it.
func internalTopic(name string) bool {
	switch name {
	case "__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata":
		return true
	}
	return false
}

// existingTopics appends to topics those of names that exist, asked for
// without auto-creation, and returns the others as missing.
func existingTopics(ctx context.Context, b Backend, topics, names []string) (_, missing []string) {
	out, err := b.Metadata(ctx, &request.MetadataRequest{Topics: names})
	exists := map[string]bool{}
	if err == nil {
		for _, t := range out.Topics {
			exists[t.Info.Name] = t.Err == nil
		}
	}
	for _, name := range names {
		if exists[name] {
			topics = append(topics, name)
		} else {
			missing = append(missing, name)
		}
	}
	return topics, missing
}

// topicID is a topic id in its 16 bytes (the metadata keeps Kafka's
// base64url form); zero when it is not one.
func topicID(s string) [16]byte {
	var id [16]byte
	if b, err := base64.RawURLEncoding.DecodeString(s); err == nil && len(b) == 16 {
		copy(id[:], b)
	}
	return id
}
