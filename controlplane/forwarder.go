package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/metadata"
)

// Forwarder runs controller operations wherever the controller is: on the
// local Controller when this node is it, else over gRPC to the current
// controller (the raft leader as this node knows it, the one a refusing
// node named, or each voter in turn). Elections and unreachable nodes are
// retried with backoff until ctx expires; other errors come back as
// metadata sentinels (errors.Is works across the wire).
type Forwarder struct {
	node *metadata.Node
	dial func(addr string) (*grpc.ClientConn, error)

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	hint  string // controller address a peer named last
	next  int    // voter to try when no controller is known
}

// NewForwarder returns a Forwarder for node. dial opens a connection to a
// node's gRPC address; nil dials plaintext.
func NewForwarder(node *metadata.Node, dial func(addr string) (*grpc.ClientConn, error)) *Forwarder {
	if dial == nil {
		dial = func(addr string) (*grpc.ClientConn, error) {
			return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		}
	}
	return &Forwarder{node: node, dial: dial, conns: map[string]*grpc.ClientConn{}}
}

// Close closes the connections the Forwarder opened.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for addr, cc := range f.conns {
		errs = append(errs, cc.Close())
		delete(f.conns, addr)
	}
	return errors.Join(errs...)
}

// target picks the address to try: the raft leader as known here, else
// the last hint, else the voters in turn.
func (f *Forwarder) target() string {
	if _, addr, ok := f.node.Controller(); ok {
		return addr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hint != "" {
		h := f.hint
		f.hint = ""
		return h
	}
	voters := f.node.Voters()
	if len(voters) == 0 {
		return ""
	}
	v := voters[f.next%len(voters)]
	f.next++
	return v.Addr
}

func (f *Forwarder) client(addr string) (pb.ControllerServiceClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cc, ok := f.conns[addr]
	if !ok {
		var err error
		cc, err = f.dial(addr)
		if err != nil {
			return nil, fmt.Errorf("controlplane: dial %s: %w", addr, err)
		}
		f.conns[addr] = cc
	}
	return pb.NewControllerServiceClient(cc), nil
}

// do runs one operation locally or remotely, retrying retriable failures
// until ctx is done.
func (f *Forwarder) do(ctx context.Context, local func(*metadata.Controller) error, remote func(pb.ControllerServiceClient) error) error {
	backoff := 10 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
		var err error
		if f.node.IsController() {
			err = local(f.node.Ctl())
		} else if addr := f.target(); addr == "" {
			err = &metadata.NotControllerError{LeaderID: -1}
		} else {
			var c pb.ControllerServiceClient
			if c, err = f.client(addr); err == nil {
				err = fromStatus(remote(c))
			}
		}
		if err == nil || !retriable(err) {
			return err
		}
		var nc *metadata.NotControllerError
		if errors.As(err, &nc) && nc.LeaderAddr != "" {
			f.mu.Lock()
			f.hint = nc.LeaderAddr
			f.mu.Unlock()
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(err, metadata.ErrNotController) || errors.Is(err, metadata.ErrNoQuorum) {
				return fmt.Errorf("%w: %w (last: %v)", metadata.ErrNoQuorum, ctx.Err(), err)
			}
			return fmt.Errorf("controlplane: %w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

// CreateTopic creates a topic on the controller.
func (f *Forwarder) CreateTopic(ctx context.Context, spec metadata.TopicSpec) (metadata.TopicInfo, error) {
	var out metadata.TopicInfo
	if spec.ID == "" {
		// Fix the id before the first attempt so a retry of a create that
		// did commit is recognised as the same create.
		id, err := metadata.NewTopicID()
		if err != nil {
			return out, err
		}
		spec.ID = id
	}
	err := f.do(ctx, func(c *metadata.Controller) (err error) {
		out, err = c.CreateTopic(ctx, spec)
		return err
	}, func(c pb.ControllerServiceClient) error {
		resp, err := c.CreateTopic(ctx, specToPB(spec))
		if err == nil {
			out = topicFromPB(resp.Topic)
		}
		return err
	})
	return out, err
}

// DeleteTopic deletes a topic on the controller.
func (f *Forwarder) DeleteTopic(ctx context.Context, name string) error {
	return f.do(ctx, func(c *metadata.Controller) error {
		return c.DeleteTopic(ctx, name)
	}, func(c pb.ControllerServiceClient) error {
		_, err := c.DeleteTopic(ctx, &pb.DeleteTopicRequest{Name: name})
		return err
	})
}

// AlterConfigs changes topic configs on the controller.
func (f *Forwarder) AlterConfigs(ctx context.Context, topic string, set map[string]string, del []string) error {
	return f.do(ctx, func(c *metadata.Controller) error {
		return c.AlterConfigs(ctx, topic, set, del)
	}, func(c pb.ControllerServiceClient) error {
		_, err := c.AlterConfigs(ctx, &pb.AlterConfigsRequest{Topic: topic, Set: set, Delete: del})
		return err
	})
}

// CreatePartitions grows a topic on the controller.
func (f *Forwarder) CreatePartitions(ctx context.Context, topic string, total int32) error {
	return f.do(ctx, func(c *metadata.Controller) error {
		return c.CreatePartitions(ctx, topic, total)
	}, func(c pb.ControllerServiceClient) error {
		_, err := c.CreatePartitions(ctx, &pb.CreatePartitionsRequest{Topic: topic, Total: total})
		return err
	})
}

// RegisterBroker registers a broker with the controller.
func (f *Forwarder) RegisterBroker(ctx context.Context, b metadata.BrokerInfo) (int64, error) {
	var epoch int64
	err := f.do(ctx, func(c *metadata.Controller) (err error) {
		epoch, err = c.RegisterBroker(ctx, b)
		return err
	}, func(c pb.ControllerServiceClient) error {
		resp, err := c.RegisterBroker(ctx, &pb.RegisterBrokerRequest{Broker: brokerToPB(b)})
		if err == nil {
			epoch = resp.BrokerEpoch
		}
		return err
	})
	return epoch, err
}

// Heartbeat sends a broker heartbeat to the controller.
func (f *Forwarder) Heartbeat(ctx context.Context, brokerID int32, incarnation string, brokerEpoch int64) error {
	return f.do(ctx, func(c *metadata.Controller) error {
		return c.Heartbeat(ctx, brokerID, incarnation, brokerEpoch)
	}, func(c pb.ControllerServiceClient) error {
		_, err := c.BrokerHeartbeat(ctx, &pb.BrokerHeartbeatRequest{BrokerId: brokerID, Incarnation: incarnation, BrokerEpoch: brokerEpoch})
		return err
	})
}

// AlterPartition asks the controller for an ISR change.
func (f *Forwarder) AlterPartition(ctx context.Context, topic string, p int32, leaderID int32, leaderEpoch int32, partitionEpoch int32, isr []int32) (metadata.PartitionInfo, error) {
	var out metadata.PartitionInfo
	err := f.do(ctx, func(c *metadata.Controller) (err error) {
		out, err = c.AlterPartition(ctx, topic, p, leaderID, leaderEpoch, partitionEpoch, isr)
		return err
	}, func(c pb.ControllerServiceClient) error {
		resp, err := c.AlterPartition(ctx, &pb.AlterPartitionRequest{
			Topic: topic, Partition: p, LeaderId: leaderID, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, Isr: isr,
		})
		if err == nil {
			out = partitionFromPB(resp.Partition)
		}
		return err
	})
	return out, err
}

// ControlledShutdown moves a stopping broker's leaderships away.
func (f *Forwarder) ControlledShutdown(ctx context.Context, brokerID int32) error {
	return f.do(ctx, func(c *metadata.Controller) error {
		return c.ControlledShutdown(ctx, brokerID)
	}, func(c pb.ControllerServiceClient) error {
		_, err := c.ControlledShutdown(ctx, &pb.ControlledShutdownRequest{BrokerId: brokerID})
		return err
	})
}

// UnregisterBroker removes a broker gone for good (see
// metadata.Controller.UnregisterBroker).
func (f *Forwarder) UnregisterBroker(ctx context.Context, brokerID int32) error {
	return f.do(ctx, func(c *metadata.Controller) error {
		return c.UnregisterBroker(ctx, brokerID)
	}, func(c pb.ControllerServiceClient) error {
		_, err := c.UnregisterBroker(ctx, &pb.UnregisterBrokerRequest{BrokerId: brokerID})
		return err
	})
}

// CommitOffsets commits a consumer group's offsets on the controller at
// commitTime. A retry after an ambiguous failure commits the same offsets
// again, which is harmless.
func (f *Forwarder) CommitOffsets(ctx context.Context, group string, offsets []metadata.OffsetCommit, commitTime time.Time) error {
	return f.do(ctx, func(c *metadata.Controller) error {
		return c.CommitOffsets(ctx, group, offsets, commitTime)
	}, func(c pb.ControllerServiceClient) error {
		_, err := c.CommitOffsets(ctx, &pb.CommitOffsetsRequest{Group: group, Offsets: offsetCommitsToPB(offsets), CommitTimeMs: commitTime.UnixMilli()})
		return err
	})
}

// FetchOffsets reads a group's committed offsets from the controller's
// image (see metadata.Controller.FetchOffsets).
func (f *Forwarder) FetchOffsets(ctx context.Context, group string, partitions []metadata.TopicPartition) ([]metadata.CommittedOffset, error) {
	var out []metadata.CommittedOffset
	err := f.do(ctx, func(c *metadata.Controller) (err error) {
		out, err = c.FetchOffsets(ctx, group, partitions)
		return err
	}, func(c pb.ControllerServiceClient) error {
		req := &pb.FetchOffsetsRequest{Group: group, Partitions: make([]*pb.GroupPartition, len(partitions))}
		for i, p := range partitions {
			req.Partitions[i] = &pb.GroupPartition{Topic: p.Topic, Partition: p.Partition}
		}
		resp, err := c.FetchOffsets(ctx, req)
		if err != nil {
			return err
		}
		out = make([]metadata.CommittedOffset, len(resp.Offsets))
		for i, o := range resp.Offsets {
			out[i] = metadata.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
				LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimeMs: o.CommitTimeMs}
		}
		return nil
	})
	return out, err
}

// ListGroups lists the groups with committed offsets, from the
// controller's image.
func (f *Forwarder) ListGroups(ctx context.Context) ([]string, error) {
	var out []string
	err := f.do(ctx, func(c *metadata.Controller) (err error) {
		out, err = c.ListGroups(ctx)
		return err
	}, func(c pb.ControllerServiceClient) error {
		resp, err := c.ListGroups(ctx, &pb.ListGroupsRequest{})
		if err == nil {
			out = resp.Groups
		}
		return err
	})
	return out, err
}

// DeleteGroup removes a group's committed offsets on the controller.
func (f *Forwarder) DeleteGroup(ctx context.Context, group string) error {
	return f.do(ctx, func(c *metadata.Controller) error {
		return c.DeleteGroup(ctx, group)
	}, func(c pb.ControllerServiceClient) error {
		_, err := c.DeleteGroup(ctx, &pb.DeleteGroupRequest{Group: group})
		return err
	})
}
