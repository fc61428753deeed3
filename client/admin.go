package client

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// TopicSpec describes a topic to create. Zero Partitions or
// ReplicationFactor take the broker's defaults (num.partitions,
// default.replication.factor).
//
// Partitions and ReplicationFactor left at 0 take the broker's
// num.partitions and default.replication.factor; any other value, a
// negative one included, is sent as given for the broker to check.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int32
	Configs           map[string]string
}

// TopicListing is one line of ListTopics.
type TopicListing struct {
	Name              string `json:"name"`
	ID                string `json:"id"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int32  `json:"replication_factor"`
}

// TopicDescription is a topic with its partitions and the configs set on
// it.
type TopicDescription struct {
	Name       string                 `json:"name"`
	ID         string                 `json:"id"`
	Partitions []PartitionDescription `json:"partitions"`
	Configs    map[string]string      `json:"configs,omitempty"`
}

// PartitionDescription is one partition: leader, replicas, in-sync
// replicas and offsets (-1 when the leader could not be asked).
type PartitionDescription struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	LogStartOffset int64   `json:"log_start_offset"`
	HighWatermark  int64   `json:"high_watermark"`
	LogEndOffset   int64   `json:"log_end_offset"`
	// SizeBytes is the leader's log on disk, -1 with the offsets (0 from
	// a broker that does not report it).
	SizeBytes int64 `json:"size_bytes"`
	// OfflineReplicas are the replicas whose log failed on their broker
	// (an I/O error: taken out of service, out of the ISR).
	OfflineReplicas []OfflineReplica `json:"offline_replicas,omitempty"`
	// DirtyRatio is, for a compacted topic, the share of the leader's
	// cleanable bytes written since its last clean; nil otherwise (or
	// when the leader did not answer).
	DirtyRatio *float64 `json:"dirty_ratio,omitempty"`
	// AddingReplicas and RemovingReplicas are a pending reassignment
	// (both in Replicas); empty when none is pending.
	AddingReplicas   []int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas []int32 `json:"removing_replicas,omitempty"`
}

// OfflineReplica is a replica whose log failed: its broker, the log's
// directory and the error.
type OfflineReplica struct {
	Broker int32  `json:"broker"`
	Dir    string `json:"dir"`
	Error  string `json:"error"`
}

// ConfigEntry is one topic config with where its value comes from.
type ConfigEntry struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"`
	Doc    string `json:"doc,omitempty"`
}

// ClusterDescription lists the brokers and the controller.
type ClusterDescription struct {
	ClusterID    string              `json:"cluster_id"`
	ControllerID int32               `json:"controller_id"`
	Brokers      []BrokerDescription `json:"brokers"`
}

// BrokerDescription is one broker of the cluster.
type BrokerDescription struct {
	ID         int32  `json:"id"`
	Address    string `json:"address"`
	Rack       string `json:"rack,omitempty"`
	Fenced     bool   `json:"fenced"`
	Controller bool   `json:"controller"`
	// Partitions is the partition replicas assigned to it; MaxPartitions
	// how many it may host (max.partitions.per.broker), 0 when unknown.
	Partitions    int32 `json:"partitions"`
	MaxPartitions int32 `json:"max_partitions"`
	// Cordoned: no new replica is placed on it (CordonBroker).
	Cordoned bool `json:"cordoned"`
	// ReassignmentThrottle is its replica.reassignment.throttle.bytes.per.second
	// as SetReassignmentThrottle set it; -1 when not set (its configuration's).
	ReassignmentThrottle int64 `json:"reassignment_throttle"`
}

// admin runs an admin call on any broker (every node serves them and
// forwards writes to the controller). What may work on a second try is
// retried with backoff until ctx ends, or for at most the request timeout
// when ctx has no deadline: an election (NOT_CONTROLLER: the node reached
// no controller within metadata.write.timeout.ms), unreachable brokers,
// timeouts. Other errors, retriable or not (UNKNOWN_TOPIC_OR_PARTITION is
// an answer here), return at once.
func (c *Client) admin(ctx context.Context, fn func(ctx context.Context, a quirev1.AdminClient) error) error {
	return c.anyBrokerRetried(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		return fn(ctx, quirev1.NewAdminClient(cc))
	})
}

// anyBrokerRetried is admin for any service: fn gets a connection to a
// broker, and what may work on a second try is retried the same way.
func (c *Client) anyBrokerRetried(ctx context.Context, fn func(ctx context.Context, cc *grpc.ClientConn) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.requestTimeout)
		defer cancel()
	}
	backoff := c.cfg.retryBackoff
	for {
		err := c.anyBroker(ctx, fn)
		if err == nil || !adminRetriable(err) {
			return err
		}
		c.log.Debug("retrying admin call", "error", err, "backoff", backoff)
		if serr := c.sleepCtx(ctx, backoff); serr != nil {
			return fmt.Errorf("%w (last error: %w)", serr, err)
		}
		backoff = min(2*backoff, time.Second)
	}
}

// adminRetriable reports whether an admin call that failed with err may
// succeed if sent again. It narrows retriable, never widens it: only the
// codes that say the controller or the node could not be reached are
// ridden out; any other error, retriable or not (an unknown topic), is the
// call's answer.
func adminRetriable(err error) bool {
	switch ErrorCode(err) {
	case quirev1.ErrorCode_NOT_CONTROLLER, quirev1.ErrorCode_NETWORK_EXCEPTION, quirev1.ErrorCode_REQUEST_TIMED_OUT,
		quirev1.ErrorCode_BROKER_NOT_AVAILABLE, quirev1.ErrorCode_LEADER_NOT_AVAILABLE:
		return retriable(err)
	}
	return false
}

// CreateTopic creates a topic and returns its description. It rides out a
// controller election (see admin), exactly once: it picks a random
// request id before the first attempt and sends it with every retry
// (CreateTopicRequest.request_id), so when an attempt's outcome is
// unknown to the client (the node handling it failed or timed out just
// as the controller committed), the retry finds the topic that attempt
// created, kept with that request id, and answers it as created;
// TOPIC_ALREADY_EXISTS means a topic of that name made by another
// create. A cluster below metadata.version 18 keeps no request id: there
// such a retry is TOPIC_ALREADY_EXISTS.
func (c *Client) CreateTopic(ctx context.Context, spec TopicSpec) (*TopicDescription, error) {
	rid, err := newRequestID()
	if err != nil {
		return nil, err
	}
	req := &quirev1.CreateTopicRequest{Name: spec.Name, Configs: spec.Configs, RequestId: rid}
	if spec.Partitions != 0 {
		req.OptionalPartitions = &quirev1.CreateTopicRequest_Partitions{Partitions: spec.Partitions}
	}
	if spec.ReplicationFactor != 0 {
		req.OptionalReplicationFactor = &quirev1.CreateTopicRequest_ReplicationFactor{ReplicationFactor: spec.ReplicationFactor}
	}
	var resp *quirev1.CreateTopicResponse
	err = c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) (err error) {
		resp, err = a.CreateTopic(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.sawMetadataIndex(resp.GetMetadataIndex())
	c.meta.triggerRefresh()
	return topicDesc(resp.GetTopic()), nil
}

// newRequestID returns a random CreateTopic request id: 16 bytes in
// unpadded base64url, 22 characters of printable ASCII.
func newRequestID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("client: create request id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// DeleteTopic deletes a topic and its data.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	err := c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) error {
		resp, err := a.DeleteTopic(ctx, &quirev1.DeleteTopicRequest{Name: name})
		if err == nil {
			c.sawMetadataIndex(resp.GetMetadataIndex())
		}
		return err
	})
	if err == nil {
		c.meta.triggerRefresh()
	}
	return err
}

// ListTopics lists the topics, sorted by name.
func (c *Client) ListTopics(ctx context.Context) ([]TopicListing, error) {
	var resp *quirev1.ListTopicsResponse
	err := c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) (err error) {
		resp, err = a.ListTopics(ctx, &quirev1.ListTopicsRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]TopicListing, 0, len(resp.GetTopics()))
	for _, t := range resp.GetTopics() {
		out = append(out, TopicListing{Name: t.GetName(), ID: t.GetTopicId(), Partitions: t.GetPartitions(),
			ReplicationFactor: t.GetReplicationFactor()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DescribeTopics describes the named topics (every topic when none is
// named).
func (c *Client) DescribeTopics(ctx context.Context, names ...string) ([]TopicDescription, error) {
	var resp *quirev1.DescribeTopicsResponse
	err := c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) (err error) {
		resp, err = a.DescribeTopics(ctx, &quirev1.DescribeTopicsRequest{Names: names})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]TopicDescription, 0, len(resp.GetTopics()))
	for _, t := range resp.GetTopics() {
		out = append(out, *topicDesc(t))
	}
	return out, nil
}

func topicDesc(t *quirev1.TopicDescription) *TopicDescription {
	if t == nil {
		return nil
	}
	d := &TopicDescription{Name: t.GetName(), ID: t.GetTopicId(), Configs: t.GetConfigs()}
	for _, p := range t.GetPartitions() {
		pd := PartitionDescription{Partition: p.GetPartition(), Leader: p.GetLeader(),
			LeaderEpoch: p.GetLeaderEpoch(), Replicas: p.GetReplicas(), ISR: p.GetIsr(),
			LogStartOffset: p.GetLogStartOffset(), HighWatermark: p.GetHighWatermark(), LogEndOffset: p.GetLogEndOffset(),
			SizeBytes: p.GetSizeBytes(), AddingReplicas: p.GetAddingReplicas(), RemovingReplicas: p.GetRemovingReplicas()}
		for _, o := range p.GetOfflineReplicas() {
			pd.OfflineReplicas = append(pd.OfflineReplicas, OfflineReplica{Broker: o.GetBrokerId(), Dir: o.GetDir(), Error: o.GetError()})
		}
		if r, ok := p.GetOptionalDirtyRatio().(*quirev1.PartitionDescription_DirtyRatio); ok {
			ratio := r.DirtyRatio
			pd.DirtyRatio = &ratio
		}
		d.Partitions = append(d.Partitions, pd)
	}
	sort.Slice(d.Partitions, func(i, j int) bool { return d.Partitions[i].Partition < d.Partitions[j].Partition })
	return d
}

// DescribeConfigs returns every config of a topic with its effective value.
func (c *Client) DescribeConfigs(ctx context.Context, topic string) ([]ConfigEntry, error) {
	return c.describeConfigs(ctx, &quirev1.DescribeConfigsRequest{Topic: topic})
}

// DescribeGroupConfigs returns every setting of a share group with its
// effective value, Source "group" when set on the group, else "broker"
// (the node's).
func (c *Client) DescribeGroupConfigs(ctx context.Context, group string) ([]ConfigEntry, error) {
	return c.describeConfigs(ctx, &quirev1.DescribeConfigsRequest{Group: group})
}

// AlterGroupConfigs sets settings of a share group (share.key.ordering,
// errors.deadletterqueue.topic.name, share.record.lock.duration.ms,
// share.delivery.count.limit, share.auto.offset.reset,
// max.in.flight.per.key, share.isolation.level,
// share.partition.max.record.locks,
// errors.deadletterqueue.copy.record.enable) and returns
// the keys in del to the node's values.
func (c *Client) AlterGroupConfigs(ctx context.Context, group string, set map[string]string, del ...string) error {
	return c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) error {
		_, err := a.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Group: group, Set: set, Delete: del})
		return err
	})
}

func (c *Client) describeConfigs(ctx context.Context, req *quirev1.DescribeConfigsRequest) ([]ConfigEntry, error) {
	var resp *quirev1.DescribeConfigsResponse
	err := c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) (err error) {
		resp, err = a.DescribeConfigs(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]ConfigEntry, 0, len(resp.GetConfigs()))
	for _, e := range resp.GetConfigs() {
		src := "default"
		switch e.GetSource() {
		case quirev1.ConfigSource_CONFIG_SOURCE_BROKER:
			src = "broker"
		case quirev1.ConfigSource_CONFIG_SOURCE_TOPIC:
			src = "topic"
		case quirev1.ConfigSource_CONFIG_SOURCE_GROUP:
			src = "group"
		}
		out = append(out, ConfigEntry{Name: e.GetName(), Value: e.GetValue(), Source: src, Doc: e.GetDocumentation()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// AlterConfigs sets configs on a topic and returns the keys in del to
// their defaults.
func (c *Client) AlterConfigs(ctx context.Context, topic string, set map[string]string, del ...string) error {
	return c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) error {
		_, err := a.AlterConfigs(ctx, &quirev1.AlterConfigsRequest{Topic: topic, Set: set, Delete: del})
		return err
	})
}

// CreatePartitions raises a topic's partition count to total.
func (c *Client) CreatePartitions(ctx context.Context, topic string, total int32) (*TopicDescription, error) {
	var resp *quirev1.CreatePartitionsResponse
	err := c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) (err error) {
		resp, err = a.CreatePartitions(ctx, &quirev1.CreatePartitionsRequest{Topic: topic, TotalCount: total})
		return err
	})
	if err != nil {
		return nil, err
	}
	c.sawMetadataIndex(resp.GetMetadataIndex())
	c.meta.triggerRefresh()
	return topicDesc(resp.GetTopic()), nil
}

// DescribeCluster lists the brokers and names the controller.
func (c *Client) DescribeCluster(ctx context.Context) (*ClusterDescription, error) {
	var resp *quirev1.DescribeClusterResponse
	err := c.admin(ctx, func(ctx context.Context, a quirev1.AdminClient) (err error) {
		resp, err = a.DescribeCluster(ctx, &quirev1.DescribeClusterRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	d := &ClusterDescription{ClusterID: resp.GetClusterId(), ControllerID: resp.GetControllerId()}
	for _, b := range resp.GetBrokers() {
		d.Brokers = append(d.Brokers, BrokerDescription{ID: b.GetId(), Address: b.GetAddress(), Rack: b.GetRack(),
			Fenced: b.GetFenced(), Controller: b.GetController(), Partitions: b.GetPartitions(), MaxPartitions: b.GetMaxPartitions(),
			Cordoned: b.GetCordoned(), ReassignmentThrottle: b.GetReassignmentThrottle()})
	}
	sort.Slice(d.Brokers, func(i, j int) bool { return d.Brokers[i].ID < d.Brokers[j].ID })
	return d, nil
}

// EnsureTopic returns a topic's partition count from fresh metadata; a
// topic that does not exist is created with the broker's defaults if the
// broker allows it (auto.create.topics.enable), and created says so. A
// broker that does not answers UNKNOWN_TOPIC_OR_PARTITION at once.
func (c *Client) EnsureTopic(ctx context.Context, topic string) (partitions int32, created bool, err error) {
	n, err := c.PartitionCount(ctx, topic)
	if ErrorCode(err) != quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION {
		return n, false, err
	}
	if err := c.meta.refresh(ctx, []string{topic}, true); err != nil {
		return 0, false, err
	}
	n, err = c.cachedPartitionCount(topic)
	return n, err == nil, err
}

// PartitionCount returns a topic's partition count from fresh metadata.
func (c *Client) PartitionCount(ctx context.Context, topic string) (int32, error) {
	if err := c.meta.refresh(ctx, []string{topic}, false); err != nil {
		return 0, err
	}
	return c.cachedPartitionCount(topic)
}

// cachedPartitionCount is PartitionCount from the metadata cached.
func (c *Client) cachedPartitionCount(topic string) (int32, error) {
	tm := c.meta.topic(topic)
	if tm == nil {
		return 0, newError(quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "unknown topic "+topic)
	}
	if tm.err != nil {
		return 0, tm.err
	}
	return int32(len(tm.partitions)), nil
}

// ListOffsets resolves a start position (AtStart, AtEnd, AtTimestamp or
// At) to an offset for each of a topic's partitions (every partition when
// none is named), asking each partition's leader. AtTimestamp gives -1 for
// a partition with no record at or after the time. A retriable answer
// (a leader that has not yet applied a topic just created, a leadership
// move) is asked again, with fresh metadata where leadership is in
// doubt, until ctx ends (or the request timeout, when ctx has no
// deadline).
func (c *Client) ListOffsets(ctx context.Context, topic string, at Offset, partitions ...int32) (map[int32]int64, error) {
	n, err := c.PartitionCount(ctx, topic)
	if err != nil {
		return nil, err
	}
	if len(partitions) == 0 {
		for p := int32(0); p < n; p++ {
			partitions = append(partitions, p)
		}
	}
	for _, p := range partitions {
		if p < 0 || p >= n {
			return nil, fmt.Errorf("%w: %s/%d of %d", ErrNoSuchPartition, topic, p, n)
		}
	}
	out := make(map[int32]int64, len(partitions))
	ts := int64(-2)
	switch at.kind {
	case offsetExact:
		for _, p := range partitions {
			out[p] = at.at
		}
		return out, nil
	case offsetEnd:
		ts = -1
	case offsetTime:
		ts = at.at
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.requestTimeout)
		defer cancel()
	}
	backoff := c.cfg.retryBackoff
	for {
		todo, err := c.listOffsetsOnce(ctx, topic, ts, partitions, out)
		if err == nil {
			return out, nil
		}
		if !retriable(err) {
			return nil, err
		}
		c.log.Debug("retrying list offsets", "topic", topic, "partitions", todo, "error", err, "backoff", backoff)
		if serr := c.sleepCtx(ctx, backoff); serr != nil {
			return nil, fmt.Errorf("%w (last error: %w)", serr, err)
		}
		backoff = min(2*backoff, time.Second)
		if needsMetadata(err) {
			if merr := c.meta.refresh(ctx, []string{topic}, false); merr != nil && !retriable(merr) {
				return nil, merr
			}
		}
		partitions = todo
	}
}

// listOffsetsOnce asks each partition's leader once, filling out; it
// returns the partitions still to ask and the first error met.
func (c *Client) listOffsetsOnce(ctx context.Context, topic string, ts int64, partitions []int32, out map[int32]int64) ([]int32, error) {
	byLeader := map[int32]*quirev1.ListOffsetsRequest{}
	var todo []int32
	var first error
	fail := func(p int32, err error) {
		todo = append(todo, p)
		if first == nil {
			first = err
		}
	}
	tm := c.meta.topic(topic)
	for _, p := range partitions {
		if tm == nil || int(p) >= len(tm.partitions) {
			fail(p, &Error{Code: quirev1.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION,
				Message: fmt.Sprintf("%s/%d not in metadata", topic, p), Retriable: true, LeaderID: -1})
			continue
		}
		l := tm.partitions[p].leader
		if byLeader[l] == nil {
			byLeader[l] = &quirev1.ListOffsetsRequest{}
		}
		byLeader[l].Partitions = append(byLeader[l].Partitions, &quirev1.ListOffsetsPartition{Topic: topic, Partition: p, TimestampMs: ts})
	}
	for leader, req := range byLeader {
		res, err := c.listOffsets(ctx, leader, req)
		if err != nil {
			for _, rp := range req.Partitions {
				fail(rp.Partition, err)
			}
			continue
		}
		for _, r := range res {
			if err := fromProto(r.GetError()); err != nil {
				fail(r.GetPartition(), fmt.Errorf("client: list offsets %s/%d: %w", topic, r.GetPartition(), err))
				continue
			}
			out[r.GetPartition()] = r.GetOffset()
		}
	}
	return todo, first
}
