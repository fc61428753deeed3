package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/metadata"
)

// Forwarder runs controller calls wherever the controller is: through
// this node's own ControllerService handlers when this node is it, else
// over gRPC to the current controller (the raft leader as this node knows
// it, the one a refusing node named, or each voter in turn). Both ways
// answer the same status, turned back into metadata sentinels in one place
// (fromStatus), so errors.Is works alike. Elections and unreachable nodes
// are retried with backoff until ctx expires or the write timeout passes;
// a call that found no controller in time fails with metadata.ErrNoQuorum.
type Forwarder struct {
	node         *metadata.Node
	local        *Service
	dial         func(addr string) (*grpc.ClientConn, error)
	writeTimeout time.Duration

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	hint  string // controller address a peer named last
	next  int    // voter to try when no controller is known
}

// NewForwarder returns a Forwarder for node. dial opens a connection to a
// node's gRPC address; nil dials plaintext. writeTimeout bounds every call
// (metadata.write.timeout.ms) unless ctx ends sooner; 0 leaves it to ctx.
func NewForwarder(node *metadata.Node, dial func(addr string) (*grpc.ClientConn, error), writeTimeout time.Duration) *Forwarder {
	if dial == nil {
		dial = func(addr string) (*grpc.ClientConn, error) {
			return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		}
	}
	return &Forwarder{node: node, local: NewService(node), dial: dial, writeTimeout: writeTimeout, conns: map[string]*grpc.ClientConn{}}
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

// Call runs one ControllerService call where the controller is: local
// is the handler this node serves it with ((*Service).CreateTopic), remote
// the client stub (pb.ControllerServiceClient.CreateTopic). Adding a
// controller RPC is its proto, its Service handler and one Call.
func Call[Req, Resp any](ctx context.Context, f *Forwarder,
	local func(*Service, context.Context, Req) (Resp, error),
	remote func(pb.ControllerServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error),
	req Req) (Resp, error) {
	parent := ctx
	if f.writeTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.writeTimeout)
		defer cancel()
	}
	var out Resp
	err := f.retry(ctx, func() error {
		var err error
		if f.node.IsController() {
			out, err = local(f.local, ctx, req)
		} else if addr := f.target(); addr == "" {
			return &metadata.NotControllerError{LeaderID: -1}
		} else {
			var c pb.ControllerServiceClient
			if c, err = f.client(addr); err != nil {
				return err
			}
			out, err = remote(c, ctx, req)
		}
		if err != nil && ctx.Err() != nil && (status.Code(err) == codes.DeadlineExceeded || status.Code(err) == codes.Canceled) {
			// The call ran out of time on either side: say so as the
			// context does, not as an opaque status.
			return fmt.Errorf("controlplane: %w (last: %v)", ctx.Err(), err)
		}
		if status.Code(err) == codes.DeadlineExceeded {
			// The controller's side of the call ran out of the deadline
			// it was sent a moment before this side's did: the same
			// timeout, which unavailable turns into ErrNoQuorum.
			return fmt.Errorf("controlplane: %w (last: %v)", context.DeadlineExceeded, err)
		}
		return fromStatus(err)
	})
	return out, unavailable(parent, err)
}

// retry runs attempt until it succeeds, fails for good, or ctx is done.
func (f *Forwarder) retry(ctx context.Context, attempt func() error) error {
	backoff := 10 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
		err := attempt()
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

// unavailable turns a call that found no controller within the write
// timeout into metadata.ErrNoQuorum (UNAVAILABLE, retriable) rather than a
// bare deadline, unless the caller's own context ended it.
func unavailable(parent context.Context, err error) error {
	if err == nil || errors.Is(err, metadata.ErrNoQuorum) || parent.Err() != nil {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: no controller answered: %w", metadata.ErrNoQuorum, err)
	}
	return err
}

// CreateTopic creates a topic on the controller.
func (f *Forwarder) CreateTopic(ctx context.Context, spec metadata.TopicSpec) (metadata.TopicInfo, error) {
	if spec.ID == "" {
		// Fix the id before the first attempt so a retry of a create that
		// did commit is recognised as the same create.
		id, err := metadata.NewTopicID()
		if err != nil {
			return metadata.TopicInfo{}, err
		}
		spec.ID = id
	}
	resp, err := Call(ctx, f, (*Service).CreateTopic, pb.ControllerServiceClient.CreateTopic, specToPB(spec))
	if err != nil {
		return metadata.TopicInfo{}, err
	}
	return topicFromPB(resp.Topic), nil
}

// DeleteTopic deletes a topic on the controller; with id, only the
// incarnation with that id.
func (f *Forwarder) DeleteTopic(ctx context.Context, name, id string) error {
	_, err := Call(ctx, f, (*Service).DeleteTopic, pb.ControllerServiceClient.DeleteTopic, &pb.DeleteTopicRequest{Name: name, TopicId: id})
	return err
}

// AlterConfigs changes topic configs on the controller.
func (f *Forwarder) AlterConfigs(ctx context.Context, topic string, set map[string]string, del []string) error {
	_, err := Call(ctx, f, (*Service).AlterConfigs, pb.ControllerServiceClient.AlterConfigs,
		&pb.AlterConfigsRequest{Topic: topic, Set: set, Delete: del})
	return err
}

// CreatePartitions grows a topic on the controller.
func (f *Forwarder) CreatePartitions(ctx context.Context, topic string, total int32) error {
	_, err := Call(ctx, f, (*Service).CreatePartitions, pb.ControllerServiceClient.CreatePartitions,
		&pb.CreatePartitionsRequest{Topic: topic, Total: total})
	return err
}

// RegisterBroker registers a broker with the controller.
func (f *Forwarder) RegisterBroker(ctx context.Context, b metadata.BrokerInfo) (int64, error) {
	resp, err := Call(ctx, f, (*Service).RegisterBroker, pb.ControllerServiceClient.RegisterBroker,
		&pb.RegisterBrokerRequest{Broker: brokerToPB(b)})
	return resp.GetBrokerEpoch(), err
}

// Heartbeat sends a broker heartbeat to the controller, with the broker's
// partition budget (0: unknown).
func (f *Forwarder) Heartbeat(ctx context.Context, brokerID int32, incarnation string, brokerEpoch int64, maxPartitions int32) (uint64, error) {
	resp, err := Call(ctx, f, (*Service).BrokerHeartbeat, pb.ControllerServiceClient.BrokerHeartbeat,
		&pb.BrokerHeartbeatRequest{BrokerId: brokerID, Incarnation: incarnation, BrokerEpoch: brokerEpoch, MaxPartitions: maxPartitions})
	if err != nil {
		return 0, err
	}
	return resp.GetMetadataIndex(), nil
}

// AlterPartition asks the controller for an ISR change.
func (f *Forwarder) AlterPartition(ctx context.Context, topic string, p int32, leaderID int32, leaderEpoch int32, partitionEpoch int32, isr []int32) (metadata.PartitionInfo, error) {
	resp, err := Call(ctx, f, (*Service).AlterPartition, pb.ControllerServiceClient.AlterPartition, &pb.AlterPartitionRequest{
		Topic: topic, Partition: p, LeaderId: leaderID, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, Isr: isr,
	})
	if err != nil {
		return metadata.PartitionInfo{}, err
	}
	return partitionFromPB(resp.Partition), nil
}

// ControlledShutdown moves a stopping broker's leaderships away.
func (f *Forwarder) ControlledShutdown(ctx context.Context, brokerID int32) error {
	_, err := Call(ctx, f, (*Service).ControlledShutdown, pb.ControllerServiceClient.ControlledShutdown,
		&pb.ControlledShutdownRequest{BrokerId: brokerID})
	return err
}

// UnregisterBroker removes a broker gone for good (see
// metadata.Controller.UnregisterBroker).
func (f *Forwarder) UnregisterBroker(ctx context.Context, brokerID int32) error {
	_, err := Call(ctx, f, (*Service).UnregisterBroker, pb.ControllerServiceClient.UnregisterBroker,
		&pb.UnregisterBrokerRequest{BrokerId: brokerID})
	return err
}

// CommitOffsets commits a consumer group's offsets on the controller and
// returns the commit time it recorded (by its clock). now is this node's
// clock, sent for a controller of an earlier build, which records the
// time in the request (and answers none: now is returned then). A retry
// after an ambiguous failure commits the same offsets again, which is
// harmless.
func (f *Forwarder) CommitOffsets(ctx context.Context, group string, member metadata.GroupMember, offsets []metadata.OffsetCommit, now time.Time) (time.Time, error) {
	resp, err := Call(ctx, f, (*Service).CommitOffsets, pb.ControllerServiceClient.CommitOffsets,
		&pb.CommitOffsetsRequest{Group: group, Offsets: offsetCommitsToPB(offsets), CommitTimeMs: now.UnixMilli(),
			MemberId: member.ID, MemberEpoch: member.Epoch})
	if err != nil {
		return time.Time{}, err
	}
	if ms := resp.GetCommitTimeMs(); ms > 0 {
		return time.UnixMilli(ms), nil
	}
	return time.UnixMilli(now.UnixMilli()), nil
}

// FetchOffsets reads a group's committed offsets from the controller's
// image (see metadata.Controller.FetchOffsets).
func (f *Forwarder) FetchOffsets(ctx context.Context, group string, partitions []metadata.TopicPartition) ([]metadata.CommittedOffset, error) {
	req := &pb.FetchOffsetsRequest{Group: group, Partitions: make([]*pb.GroupPartition, len(partitions))}
	for i, p := range partitions {
		req.Partitions[i] = &pb.GroupPartition{Topic: p.Topic, Partition: p.Partition}
	}
	resp, err := Call(ctx, f, (*Service).FetchOffsets, pb.ControllerServiceClient.FetchOffsets, req)
	if err != nil {
		return nil, err
	}
	out := make([]metadata.CommittedOffset, len(resp.Offsets))
	for i, o := range resp.Offsets {
		out[i] = metadata.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimeMs: o.CommitTimeMs}
	}
	return out, nil
}

// ListGroups lists the groups with committed offsets or members, from
// the controller's image.
func (f *Forwarder) ListGroups(ctx context.Context) ([]metadata.GroupListing, error) {
	resp, err := Call(ctx, f, (*Service).ListGroups, pb.ControllerServiceClient.ListGroups, &pb.ListGroupsRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]metadata.GroupListing, len(resp.GetGroups()))
	for i, g := range resp.GetGroups() {
		out[i].Group = g
		if i < len(resp.GetStates()) {
			out[i].State = resp.GetStates()[i]
		}
	}
	return out, nil
}

// DeleteGroup removes an empty group (its state and committed offsets)
// on the controller.
func (f *Forwarder) DeleteGroup(ctx context.Context, group string) error {
	_, err := Call(ctx, f, (*Service).DeleteGroup, pb.ControllerServiceClient.DeleteGroup, &pb.DeleteGroupRequest{Group: group})
	return err
}
