package request

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
)

// MetadataRequest asks for the cluster's brokers and topics.
type MetadataRequest struct {
	// Topics named; none: every topic the caller may describe.
	Topics []string
	// AllowAutoTopicCreation creates the topics named that do not exist,
	// when the node auto-creates topics (Config.Creator).
	AllowAutoTopicCreation bool
	// MinIndex: answer from a metadata image at this index or newer,
	// waiting for it a while (read-your-writes after an admin call).
	MinIndex uint64
	// AllOrNothing refuses the whole request when a topic named is
	// refused (the gRPC API's rule); otherwise that topic alone gets its
	// refusal (Kafka's).
	AllOrNothing bool
}

// TopicMetadata is one topic of a Metadata answer: Info (Info.Name is
// always set), or Err.
type TopicMetadata struct {
	Info            metadata.TopicInfo
	MaxMessageBytes int
	Err             *Error
}

// MetadataResult is the cluster as this broker's metadata image has it.
// Brokers have every endpoint: the door gives each client the address on
// the listener it came in on.
type MetadataResult struct {
	ClusterID    string
	ControllerID int32
	Index        uint64
	// Stale: this broker has lost its session with the controller.
	Stale   bool
	Brokers []metadata.BrokerInfo
	// Topics: those answered first, then those refused or missing.
	Topics []TopicMetadata
}

// MaxMetadataWait bounds how long Metadata waits for the image to reach
// the index a client asks for.
const MaxMetadataWait = 5 * time.Second

// Metadata answers the brokers and topics: Describe on each topic named
// (and Create on it, or on the cluster, for one it would create), and a
// listing of every topic leaves out what the caller may not describe.
func (c *Core) Metadata(ctx context.Context, req *MetadataRequest) (*MetadataResult, error) {
	d := c.cfg.Admin.Describer
	if d == nil {
		return nil, c.fail(fmt.Errorf("%w: this node does not describe its cluster", ErrPolicyViolation))
	}
	// Every topic is authorized before any is created: a refusal of the
	// whole request creates nothing.
	var denied map[string]*Error
	for _, name := range req.Topics {
		if _, done := denied[name]; done {
			continue
		}
		err := c.authorize(ctx, auth.OpDescribe, auth.ResourceTopic, name, false)
		if err == nil && req.AllowAutoTopicCreation && c.cfg.Creator != nil {
			if _, ok := c.cfg.Cluster.Topic(name); !ok {
				err = c.authorize(ctx, auth.OpCreate, auth.ResourceTopic, name, true)
			}
		}
		if err != nil {
			if req.AllOrNothing {
				return nil, err
			}
			if denied == nil {
				denied = map[string]*Error{}
			}
			denied[name] = c.asError(err)
		}
	}
	if want := req.MinIndex; d.MetadataIndex() < want {
		until := time.Now().Add(MaxMetadataWait)
		if dl, ok := ctx.Deadline(); ok {
			// Answer before the caller gives up, so it hears why.
			if dl = dl.Add(-min(time.Until(dl)/10, 100*time.Millisecond)); dl.Before(until) {
				until = dl
			}
		}
		wctx, cancel := context.WithDeadline(ctx, until)
		err := d.WaitForIndex(wctx, want)
		cancel()
		if err != nil {
			return nil, c.fail(fmt.Errorf("%w: broker %d's metadata is at index %d, the request asks for %d or newer",
				replica.ErrRequestTimedOut, c.cfg.NodeID, d.MetadataIndex(), want))
		}
	}
	out := &MetadataResult{ClusterID: d.ClusterID(), ControllerID: d.ControllerID()}
	answer := func(t metadata.TopicInfo) {
		out.Topics = append(out.Topics, TopicMetadata{Info: t, MaxMessageBytes: c.cfg.MaxMessageBytes(t)})
	}
	var missing []TopicMetadata
	if len(req.Topics) == 0 {
		for _, t := range c.cfg.Cluster.Topics() {
			if c.mayDescribe(ctx, t.Name) {
				answer(t)
			}
		}
	}
	for _, name := range req.Topics {
		if e, ok := denied[name]; ok {
			missing = append(missing, TopicMetadata{Info: metadata.TopicInfo{Name: name}, Err: e})
			continue
		}
		t, ok := c.cfg.Cluster.Topic(name)
		if !ok && req.AllowAutoTopicCreation && c.cfg.Creator != nil {
			var err error
			if t, err = c.cfg.Creator.AutoCreateTopic(ctx, name); err != nil {
				missing = append(missing, TopicMetadata{Info: metadata.TopicInfo{Name: name}, Err: c.asError(err)})
				continue
			}
			ok = true
		}
		if !ok {
			err := unknownTopic(name)
			if req.AllowAutoTopicCreation && !errors.Is(err, ErrInvalidTopic) {
				err = fmt.Errorf("%w, and auto.create.topics.enable is false on broker %d", err, c.cfg.NodeID)
			}
			missing = append(missing, TopicMetadata{Info: metadata.TopicInfo{Name: name}, Err: c.asError(err)})
			continue
		}
		answer(t)
	}
	out.Topics = append(out.Topics, missing...)
	out.Index, out.Stale = d.MetadataIndex(), c.cfg.Cluster.SessionLost()
	out.Brokers = d.Brokers()
	slices.SortFunc(out.Brokers, func(a, b metadata.BrokerInfo) int { return int(a.ID) - int(b.ID) })
	return out, nil
}
