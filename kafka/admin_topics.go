package kafka

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quirelog/quire/request"
)

// msgPtr is an error message for a nullable field: null for none.
func msgPtr(msg string) *string {
	if msg == "" {
		return nil
	}
	return &msg
}

// duplicates are the names given more than once: Kafka answers each of
// their entries INVALID_REQUEST rather than pick one.
func duplicates(names []string) map[string]bool {
	seen := make(map[string]bool, len(names))
	dup := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			dup[n] = true
		}
		seen[n] = true
	}
	return dup
}

// createTopics creates each topic on its own: one refused (a bad name, an
// existing topic, a replication factor too large, an unknown config) gets
// its error, the others are created. -1 partitions or replication factor
// is the broker's default (num.partitions, default.replication.factor).
func createTopics(ctx context.Context, b Backend, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := kmsg.NewPtrCreateTopicsResponse()
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Topic
	}
	dup := duplicates(names)
	ctx, cancel := withTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Topic, -1, -1
		fail := func(code int16, msg string) {
			rt.ErrorCode, rt.ErrorMessage = code, msgPtr(msg)
		}
		in, code, msg := createTopicRequest(t, req.ValidateOnly)
		switch {
		case dup[t.Topic]:
			fail(invalidRequest, fmt.Sprintf("topic %q is named more than once in the request", t.Topic))
		case code != 0:
			fail(code, msg)
		default:
			out, err := b.CreateTopic(ctx, in)
			if err != nil {
				fail(coreError(err))
				break
			}
			rt.NumPartitions, rt.ReplicationFactor = t.NumPartitions, t.ReplicationFactor
			if d := out.Topic; len(d.Partitions) > 0 {
				rt.TopicID = topicID(d.ID)
				rt.NumPartitions = int32(len(d.Partitions))
				rt.ReplicationFactor = int16(len(d.Partitions[0].Replicas))
			}
			if req.Version >= 5 && !req.ValidateOnly {
				// The topic's configs as created (KIP-525); a failure to
				// read them is the tagged config error, not the topic's.
				entries, err := b.TopicConfigs(ctx, t.Topic)
				if err != nil {
					rt.ConfigErrorCode, _ = coreError(err)
				}
				for _, e := range entries {
					c := kmsg.NewCreateTopicsResponseTopicConfig()
					c.Name, c.Value, c.ReadOnly, c.Source = e.Name, kmsg.StringPtr(e.Value), e.ReadOnly, e.Source
					rt.Configs = append(rt.Configs, c)
				}
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// createTopicRequest is the admin call for one topic of a CreateTopics,
// or the error code and message of one that cannot be made.
func createTopicRequest(t kmsg.CreateTopicsRequestTopic, validateOnly bool) (*request.CreateTopicRequest, int16, string) {
	if len(t.ReplicaAssignment) > 0 {
		return nil, invalidRequest, fmt.Sprintf("topic %q: explicit replica assignments are not supported: "+
			"give the number of partitions and the replication factor, and the controller places the replicas", t.Topic)
	}
	in := &request.CreateTopicRequest{Name: t.Topic, ValidateOnly: validateOnly, Configs: map[string]string{}}
	if t.NumPartitions != -1 {
		in.Partitions = &t.NumPartitions
	}
	if t.ReplicationFactor != -1 {
		rf := int32(t.ReplicationFactor)
		in.ReplicationFactor = &rf
	}
	for _, c := range t.Configs {
		if c.Value == nil {
			return nil, kerr.InvalidConfig.Code, fmt.Sprintf("topic %q: config %q has a null value; give a value, or leave the key out for its default", t.Topic, c.Name)
		}
		if _, ok := in.Configs[c.Name]; ok {
			return nil, kerr.InvalidConfig.Code, fmt.Sprintf("topic %q: config %q is given more than once", t.Topic, c.Name)
		}
		in.Configs[c.Name] = *c.Value
	}
	return in, 0, ""
}

// deleteTopics deletes each topic on its own. Version 6 names topics by
// name or by id; an id is looked up in the metadata (UNKNOWN_TOPIC_ID
// when no topic has it).
func deleteTopics(ctx context.Context, b Backend, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := kmsg.NewPtrDeleteTopicsResponse()
	type entry struct {
		name  string
		id    [16]byte
		byID  bool
		idStr string // the metadata's form of id, for a delete by id
	}
	var entries []entry
	for _, n := range req.TopicNames {
		entries = append(entries, entry{name: n})
	}
	var byID map[[16]byte]string
	var idStrs map[[16]byte]string
	for _, t := range req.Topics {
		if t.Topic != nil {
			entries = append(entries, entry{name: *t.Topic, id: t.TopicID})
			continue
		}
		if byID == nil {
			byID, idStrs = map[[16]byte]string{}, map[[16]byte]string{}
			if md, err := b.Metadata(ctx, &request.MetadataRequest{}); err == nil {
				for _, mt := range md.Topics {
					// A topic made before topics had ids has none (the
					// zero id): it can be deleted by name only.
					if id := topicID(mt.Info.ID); id != ([16]byte{}) {
						byID[id], idStrs[id] = mt.Info.Name, mt.Info.ID
					}
				}
			}
		}
		entries = append(entries, entry{name: byID[t.TopicID], id: t.TopicID, byID: true, idStr: idStrs[t.TopicID]})
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.name != "" {
			names = append(names, e.name)
		}
	}
	dup := duplicates(names)
	ctx, cancel := withTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	for _, e := range entries {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.TopicID = e.id
		if e.name != "" {
			rt.Topic = kmsg.StringPtr(e.name)
		}
		switch {
		case e.byID && e.id == ([16]byte{}):
			rt.ErrorCode, rt.ErrorMessage = kerr.UnknownTopicID.Code, msgPtr("the zero topic id names no topic: give the topic's id or its name")
		case e.byID && e.name == "":
			rt.ErrorCode, rt.ErrorMessage = kerr.UnknownTopicID.Code, msgPtr("no topic has this id")
		case dup[e.name]:
			rt.ErrorCode, rt.ErrorMessage = invalidRequest, msgPtr(fmt.Sprintf("topic %q is named more than once in the request", e.name))
		default:
			// By id, the id goes along: the topic may have been deleted
			// and created again since it was looked up, and only the
			// incarnation named is deleted (gone: UNKNOWN_TOPIC_ID).
			if err := b.DeleteTopic(ctx, e.name, e.idStr); err != nil {
				code, msg := coreError(err)
				if e.byID && code == kerr.UnknownTopicOrPartition.Code {
					code = kerr.UnknownTopicID.Code
				}
				rt.ErrorCode, rt.ErrorMessage = code, msgPtr(msg)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// createPartitions grows each topic to its new count on its own. The
// controller places the new partitions' replicas: an explicit assignment
// is refused for its topic.
func createPartitions(ctx context.Context, b Backend, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	resp := kmsg.NewPtrCreatePartitionsResponse()
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Topic
	}
	dup := duplicates(names)
	ctx, cancel := withTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		switch {
		case dup[t.Topic]:
			rt.ErrorCode, rt.ErrorMessage = invalidRequest, msgPtr(fmt.Sprintf("topic %q is named more than once in the request", t.Topic))
		case len(t.Assignment) > 0:
			rt.ErrorCode, rt.ErrorMessage = kerr.InvalidReplicaAssignment.Code, msgPtr(fmt.Sprintf("topic %q: explicit replica assignments "+
				"are not supported: give the new count, and the controller places the new partitions' replicas", t.Topic))
		default:
			_, err := b.CreatePartitions(ctx, &request.CreatePartitionsRequest{Topic: t.Topic, TotalCount: t.Count, ValidateOnly: req.ValidateOnly})
			if err != nil {
				code, msg := coreError(err)
				rt.ErrorCode, rt.ErrorMessage = code, msgPtr(msg)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// Kafka's DescribeCluster endpoint types (KIP-919): brokers, or the
// controllers, which this protocol does not reach (they speak raft over
// gRPC).
const endpointBrokers = 1

// describeCluster lists the brokers on this listener, unfenced ones only
// unless the request asks for the fenced too (version 2).
func describeCluster(ctx context.Context, b Backend, req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.EndpointType, resp.ControllerID, resp.ClusterAuthorizedOperations = endpointBrokers, -1, authorizedOpsAbsent
	if req.Version >= 1 && req.EndpointType != endpointBrokers {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = msgPtr(fmt.Sprintf("endpoint type %d: only brokers (1) are described; the controllers are not reached over Kafka's protocol", req.EndpointType))
		return resp
	}
	out, err := b.DescribeCluster(ctx)
	if err != nil {
		code, msg := coreError(err)
		resp.ErrorCode, resp.ErrorMessage = code, msgPtr(msg)
		return resp
	}
	resp.ClusterID, resp.ControllerID = out.ClusterID, out.ControllerID
	for _, d := range out.Brokers {
		br := d.Info
		if br.Fenced && !req.IncludeFencedBrokers {
			continue
		}
		host, port, err := net.SplitHostPort(br.Addr)
		if err != nil {
			continue
		}
		p, err := strconv.ParseInt(port, 10, 32)
		if err != nil {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.IsFenced = br.ID, host, int32(p), br.Fenced
		if br.Rack != "" {
			rb.Rack = kmsg.StringPtr(br.Rack)
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp
}
