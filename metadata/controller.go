package metadata

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/quirelog/quire/api/metapb"
)

// TopicSpec asks for a new topic. Assignment, when given, fixes the
// replicas of each partition (its length is the partition count).
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
	Assignment        [][]int32
	// ID, when set, names the topic's id. A create retried with the same ID
	// after an ambiguous failure (a controller change mid-request) answers
	// the existing topic instead of ErrTopicExists. Only the node sets it,
	// with a fresh NewTopicID: a client never names a topic's id.
	ID string
	// RequestID is the client's idempotency key (quire.v1
	// CreateTopicRequest.request_id), "" none: kept with the topic from
	// metadata.version 18 (ignored below), and a topic of this name
	// created with it answers the create instead of ErrTopicExists.
	RequestID string
}

// Controller holds the controller operations and, while this node is the
// raft leader, the controller loop: broker sessions, fencing, non-voter
// membership and preferred-leader rebalancing.
type Controller struct {
	n *Node

	mu       sync.Mutex
	cancel   context.CancelFunc // of the running loop, nil when not leader
	done     chan struct{}
	ready    chan struct{} // closed once the loop took over the image
	term     uint64        // the raft term the running loop was started for
	changed  chan struct{} // closed and replaced when a loop starts or stops
	lastSeen map[int32]time.Time
	groups   GroupCoordinator // nil: Config.Coordinator unset
	txns     TxnCoordinator   // nil: Config.TxnCoordinator unset
	clock    Clock            // the commits' times
	commits  commitBatcher
}

func newController(n *Node) (*Controller, error) {
	c := &Controller{n: n, changed: make(chan struct{}), clock: systemClock{}}
	if n.cfg.Clock != nil {
		c.clock = n.cfg.Clock
	}
	if n.cfg.Coordinator != nil {
		g, err := n.cfg.Coordinator(&GroupLog{c: c})
		if err != nil {
			return nil, err
		}
		c.groups = g
	}
	if n.cfg.TxnCoordinator != nil {
		t, err := n.cfg.TxnCoordinator(&GroupLog{c: c})
		if err != nil {
			return nil, err
		}
		c.txns = t
	}
	c.commits.c = c
	return c, nil
}

// start runs the loop for leadership term. A loop still running for an
// earlier term is stopped first: raft may signal a lost and regained
// leadership as one "leader" (its leadership channel keeps only the last
// value), and the new term needs its own ControllerChange barrier and
// fresh broker sessions.
func (c *Controller) start(term uint64) {
	c.mu.Lock()
	running, old := c.cancel != nil, c.term
	c.mu.Unlock()
	if running {
		if old == term {
			return
		}
		c.n.logger.Info("leadership lost and regained: restarting the controller loop", "old_term", old, "term", term)
		c.stop()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done, c.ready, c.term = cancel, make(chan struct{}), make(chan struct{}), term
	c.lastSeen = map[int32]time.Time{}
	c.signalLocked()
	go c.run(ctx, c.done, c.ready)
}

// stop ends the loop, if running, and waits for it.
func (c *Controller) stop() {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.cancel, c.done = nil, nil
	c.signalLocked()
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// signalLocked wakes every active() waiting for a loop to start or stop.
func (c *Controller) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// notController describes the current leader for a caller to retry there.
func (c *Controller) notController() error {
	id, addr, ok := c.n.Controller()
	if !ok || id == c.n.cfg.NodeID {
		return &NotControllerError{LeaderID: -1}
	}
	return &NotControllerError{LeaderID: id, LeaderAddr: addr}
}

// active waits until this node is the controller with its loop ready, or
// fails with a NotControllerError.
func (c *Controller) active(ctx context.Context) error {
	for {
		if c.n.raft.State() != raft.Leader {
			return c.notController()
		}
		c.mu.Lock()
		var ready, done <-chan struct{} // nil (never) while no loop runs
		if c.cancel != nil {
			ready, done = c.ready, c.done
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-ready:
			return nil
		case <-done:
			// The loop gave up before taking over (see run): another
			// node leads, or this one cannot.
			select {
			case <-ready:
				return nil
			default:
				return c.notController()
			}
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrNoQuorum, ctx.Err())
		case <-c.n.stopCh:
			return ErrShutdown
		}
	}
}

// raftApply proposes one command and waits until it is applied here,
// mapping raft's failures: not leader -> NotControllerError; leadership
// lost, enqueue timeout or ctx expiry -> ErrNoQuorum. A command the FSM
// rejected returns its typed error. A command above the finalized
// metadata.version is refused before it is proposed (ErrUnsupportedVersion).
func (c *Controller) raftApply(ctx context.Context, cmd *pb.Command) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoQuorum, err)
	}
	// Never propose what some node would not know: the FSM refuses it
	// too, but the log should not carry it.
	if err := checkCommandLevel(c.n.Image(), cmd); err != nil {
		return nil, err
	}
	data, err := proto.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("metadata: encode command: %w", err)
	}
	timeout := c.n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: %w", ErrNoQuorum, context.DeadlineExceeded)
	}
	f := c.n.raft.Apply(data, timeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err = <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrNoQuorum, ctx.Err())
	case <-timer.C:
		return nil, fmt.Errorf("%w: not committed within %v", ErrNoQuorum, timeout)
	}
	switch {
	case err == nil:
	case errors.Is(err, raft.ErrNotLeader):
		return nil, c.notController()
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		return nil, fmt.Errorf("%w: %w", ErrNoQuorum, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return nil, ErrShutdown
	default:
		return nil, fmt.Errorf("metadata: apply: %w", err)
	}
	resp := f.Response()
	if rerr, ok := resp.(error); ok {
		return nil, rerr
	}
	return resp, nil
}

// propose is raftApply for a controller operation: only on the active
// controller.
func (c *Controller) propose(ctx context.Context, cmd *pb.Command) (any, error) {
	if err := c.active(ctx); err != nil {
		return nil, err
	}
	return c.raftApply(ctx, cmd)
}

// proposeAnswer is propose for a command whose apply answers a T (what
// names the operation in the error for any other answer).
func proposeAnswer[T any](ctx context.Context, c *Controller, cmd *pb.Command, what string) (T, error) {
	var zero T
	resp, err := c.propose(ctx, cmd)
	if err != nil {
		return zero, err
	}
	if r, ok := resp.(T); ok {
		return r, nil
	}
	return zero, fmt.Errorf("metadata: %s answered %v", what, resp)
}

// CreateTopic places the partitions over the live, unfenced brokers (or
// uses spec.Assignment) and creates the topic; PlanTopic says what it
// refuses.
func (c *Controller) CreateTopic(ctx context.Context, spec TopicSpec) (TopicInfo, error) {
	if err := c.active(ctx); err != nil {
		return TopicInfo{}, err
	}
	img := c.n.Image()
	if t, ok := img.topics[spec.Name]; ok {
		if (spec.ID != "" && t.ID == spec.ID) || t.CreatedBy(spec.RequestID) {
			return t.clone(), nil
		}
		return TopicInfo{}, fmt.Errorf("%w: %q", ErrTopicExists, spec.Name)
	}
	assign, err := PlanTopic(img, spec)
	if err != nil {
		return TopicInfo{}, err
	}
	id := spec.ID
	if id == "" {
		if id, err = NewTopicID(); err != nil {
			return TopicInfo{}, err
		}
	}
	cmd := &pb.CreateTopic{Name: spec.Name, TopicId: id, Configs: spec.Configs, Partitions: assignments(img, 0, assign)}
	if img.metadataVersion() >= MetadataVersionCreateRequestID {
		cmd.RequestId = spec.RequestID
	}
	resp, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_CreateTopic{CreateTopic: cmd}})
	if err != nil {
		return TopicInfo{}, err
	}
	c.n.logger.Info("created topic", "topic", spec.Name, "partitions", len(assign))
	return resp.(TopicInfo), nil
}

// DeleteTopic removes a topic; with id, only the incarnation of the
// topic with that id (a topic of that name with another id is unknown).
// Below metadata.version 13 the id is checked against the controller's
// image before proposing a delete by name.
func (c *Controller) DeleteTopic(ctx context.Context, name, id string) error {
	cmd := &pb.DeleteTopic{Name: name, TopicId: id}
	if id != "" && c.n.Image().metadataVersion() < MetadataVersionIncarnations {
		if err := c.active(ctx); err != nil {
			return err
		}
		t, ok := c.n.Image().topics[name]
		if !ok || t.ID != id {
			return fmt.Errorf("%w: topic id %s (topic %q)", ErrUnknownTopic, id, name)
		}
		cmd.TopicId = ""
	}
	_, err := c.propose(ctx, &pb.Command{Cmd: &pb.Command_DeleteTopic{DeleteTopic: cmd}})
	return err
}

// AlterConfigs sets and deletes topic config keys (validated by the
// caller; stored as given).
func (c *Controller) AlterConfigs(ctx context.Context, topic string, set map[string]string, del []string) error {
	_, err := c.propose(ctx, &pb.Command{Cmd: &pb.Command_AlterConfigs{AlterConfigs: &pb.AlterConfigs{Topic: topic, Set: set, Delete: del}}})
	return err
}

// CreatePartitions grows a topic to total partitions (see PlanPartitions).
func (c *Controller) CreatePartitions(ctx context.Context, topic string, total int32) error {
	if err := c.active(ctx); err != nil {
		return err
	}
	img := c.n.Image()
	have, assign, err := PlanPartitions(img, topic, total)
	if err != nil {
		return err
	}
	cmd := &pb.CreatePartitions{Topic: topic, Partitions: assignments(img, have, assign)}
	_, err = c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_CreatePartitions{CreatePartitions: cmd}})
	return err
}

// RegisterBroker records a broker run and returns its new broker epoch.
// Broker-only nodes are added to the raft configuration as non-voters.
// A broker whose log directory id changed has lost its data: it leaves
// every ISR, and partitions it was the only in-sync replica of go offline
// (see applyRegisterBroker); both are logged here.
func (c *Controller) RegisterBroker(ctx context.Context, b BrokerInfo) (int64, error) {
	if err := c.active(ctx); err != nil {
		return 0, err
	}
	before := c.n.Image()
	old, existed := before.Broker(b.ID)
	resp, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_RegisterBroker{RegisterBroker: &pb.RegisterBroker{
		BrokerId: b.ID, Incarnation: b.Incarnation, AdvertisedAddr: b.Addr, Rack: b.Rack, DirectoryId: b.DirectoryID,
		Endpoints:          EndpointsToPB(b.Endpoints),
		MinMetadataVersion: b.MetadataVersions.Min, MaxMetadataVersion: b.MetadataVersions.Max,
	}}})
	if err != nil {
		return 0, err
	}
	epoch := resp.(int64)
	c.mu.Lock()
	if c.lastSeen != nil {
		c.lastSeen[b.ID] = time.Now()
	}
	c.mu.Unlock()
	c.n.logger.Info("registered broker", "broker", b.ID, "epoch", epoch, "addr", b.Addr, "incarnation", b.Incarnation, "directory_id", b.DirectoryID,
		"metadata_versions", b.MetadataVersions.String())
	if existed && lostData(old, b.DirectoryID) {
		c.logDataLost(before, b.ID, old.DirectoryID, b.DirectoryID)
	}
	c.ensureMember(b.ID, b.Addr)
	return epoch, nil
}

// logDataLost reports a broker that came back with a new log directory:
// it left every ISR, and each partition it was the only in-sync replica
// of (in image before) is now offline.
func (c *Controller) logDataLost(before *Image, id int32, oldDir, newDir string) {
	log := c.n.logger
	log.Warn("broker lost its data: new log directory id, removed from every ISR",
		"broker", id, "old_directory_id", oldDir, "directory_id", newDir)
	after := c.n.Image()
	for _, name := range sortedTopicNames(before) {
		for _, p := range before.topics[name].Partitions {
			if len(p.ISR) != 1 || p.ISR[0] != id {
				continue
			}
			now, ok := after.Partition(p.Topic, p.Partition)
			if !ok || now.Leader != -1 {
				continue
			}
			log.Error("partition offline: only in-sync replica lost its data",
				"topic", p.Topic, "partition", p.Partition, "broker", id, "leader_epoch", now.LeaderEpoch,
				"unclean_leader_election", c.n.cfg.UncleanLeaderElection)
		}
	}
}

// logUncleanElections warns about each partition that unfencing broker id
// with unclean election will hand to it although it is not in the ISR:
// whatever that partition held beyond the broker's log is lost.
func (c *Controller) logUncleanElections(img *Image, id int32) {
	for _, name := range sortedTopicNames(img) {
		for _, p := range img.topics[name].Partitions {
			if p.Leader != -1 || !slices.Contains(p.Replicas, id) || slices.Contains(p.ISR, id) {
				continue
			}
			c.n.logger.Warn("unclean leader election: electing an out-of-sync replica, data was lost",
				"topic", p.Topic, "partition", p.Partition, "broker", id, "isr", p.ISR)
		}
	}
}

// Heartbeat keeps a broker's session alive; the first heartbeat of a
// registration unfences it. Heartbeats of an old run fail with
// ErrFencedBroker, of an unknown broker with ErrUnknownBroker: the broker
// registers again.
//
// maxPartitions is the broker's partition budget (0: unknown); one that
// differs from the image's is recorded (BrokerBudget) once metadata.version
// allows it.
func (c *Controller) Heartbeat(ctx context.Context, brokerID int32, incarnation string, brokerEpoch int64, maxPartitions int32) error {
	if err := c.active(ctx); err != nil {
		return err
	}
	b, ok := c.n.Image().Broker(brokerID)
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, brokerID)
	}
	if b.Incarnation != incarnation || b.Epoch != brokerEpoch {
		return fmt.Errorf("%w: broker %d epoch %d, current %d", ErrFencedBroker, brokerID, brokerEpoch, b.Epoch)
	}
	c.mu.Lock()
	if c.lastSeen != nil {
		c.lastSeen[brokerID] = time.Now()
	}
	c.mu.Unlock()
	if err := c.recordBudget(ctx, b, maxPartitions); err != nil {
		// The session is kept; the next heartbeat tries again.
		c.n.logger.Warn("cannot record broker partition budget", "broker", brokerID, "max_partitions", maxPartitions, "error", err)
	}
	if !b.Fenced {
		return nil
	}
	before := c.n.Image()
	_, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_UnfenceBroker{UnfenceBroker: &pb.UnfenceBroker{
		BrokerId: brokerID, BrokerEpoch: brokerEpoch, Unclean: c.n.cfg.UncleanLeaderElection,
	}}})
	if err == nil {
		c.n.logger.Info("unfenced broker", "broker", brokerID, "epoch", brokerEpoch)
		if c.n.cfg.UncleanLeaderElection {
			c.logUncleanElections(before, brokerID)
		}
	}
	return err
}

// recordBudget writes a broker's reported partition budget into the image
// when it differs from the recorded one and metadata.version has
// BrokerBudget; below that level no budget is recorded (none is enforced).
func (c *Controller) recordBudget(ctx context.Context, b BrokerInfo, maxPartitions int32) error {
	if maxPartitions < 0 || maxPartitions == b.MaxPartitions || c.n.Image().MetadataVersion() < MetadataVersionBrokerBudget {
		return nil
	}
	_, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_BrokerBudget{BrokerBudget: &pb.BrokerBudget{
		BrokerId: b.ID, BrokerEpoch: b.Epoch, MaxPartitions: maxPartitions,
	}}})
	if err != nil {
		return err
	}
	c.n.logger.Info("recorded broker partition budget", "broker", b.ID, "max_partitions", maxPartitions, "was", b.MaxPartitions)
	if hosted := c.n.Image().HostedReplicas()[b.ID]; maxPartitions > 0 && hosted > int(maxPartitions) {
		c.n.logger.Warn("broker hosts more partition replicas than its budget: no new ones are placed on it",
			"broker", b.ID, "hosted", hosted, "max_partitions", maxPartitions)
	}
	return nil
}

// AlterPartition is a partition leader's ISR change, applied only if its
// leader and partition epochs are current (else ErrStaleEpoch). An ISR
// without the leader itself is the leader giving its replica up (its log
// failed): leadership moves to a live member of that ISR (see successor).
func (c *Controller) AlterPartition(ctx context.Context, topic string, p int32, leaderID int32, leaderEpoch int32, partitionEpoch int32, isr []int32) (PartitionInfo, error) {
	if err := c.active(ctx); err != nil {
		return PartitionInfo{}, err
	}
	cur, ok := c.n.Image().Partition(topic, p)
	if !ok {
		return PartitionInfo{}, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, topic, p)
	}
	if cur.Leader != leaderID || cur.LeaderEpoch != leaderEpoch {
		return PartitionInfo{}, fmt.Errorf("%w: %s-%d led by %d epoch %d, not %d epoch %d",
			ErrStaleEpoch, topic, p, cur.Leader, cur.LeaderEpoch, leaderID, leaderEpoch)
	}
	leader := leaderID
	if !slices.Contains(isr, leaderID) {
		leader, isr = c.successor(cur, isr)
		c.n.logger.Warn("leader gives up its replica", "topic", topic, "partition", p, "broker", leaderID,
			"new_leader", leader, "isr", isr)
	}
	resp, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_PartitionChange{PartitionChange: &pb.PartitionChange{
		Topic: topic, Partition: p, Leader: leader, LeaderEpoch: leaderEpoch, Isr: isr, PartitionEpoch: partitionEpoch,
	}}})
	if err != nil {
		return PartitionInfo{}, err
	}
	return resp.(PartitionInfo), nil
}

// successor is who leads cur once its leader leaves the ISR (its log
// failed: an AlterPartition whose ISR lacks the leader): the first live
// member of isr in replica order, the leader epoch bumped. With none, the
// partition goes offline (leader -1) and keeps its old leader as the only
// ISR member, the one replica known to hold the committed data, to be
// elected again once it is back.
func (c *Controller) successor(cur PartitionInfo, isr []int32) (int32, []int32) {
	img := c.n.Image()
	for _, r := range cur.Replicas {
		if slices.Contains(isr, r) && img.isLive(r) {
			return r, isr
		}
	}
	if len(isr) == 0 {
		isr = []int32{cur.Leader}
	}
	return -1, isr
}

// ControlledShutdown moves a stopping broker's leaderships and ISR
// memberships to other brokers and fences it.
func (c *Controller) ControlledShutdown(ctx context.Context, brokerID int32) error {
	if err := c.active(ctx); err != nil {
		return err
	}
	b, ok := c.n.Image().Broker(brokerID)
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, brokerID)
	}
	_, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_FenceBroker{FenceBroker: &pb.FenceBroker{
		BrokerId: brokerID, BrokerEpoch: b.Epoch, Unclean: c.n.cfg.UncleanLeaderElection, ControlledShutdown: true,
	}}})
	if err == nil {
		c.mu.Lock()
		delete(c.lastSeen, brokerID)
		c.mu.Unlock()
		c.n.logger.Info("controlled shutdown", "broker", brokerID, "epoch", b.Epoch)
	}
	return err
}

// UnregisterBroker removes a broker that is gone for good: from the image
// (see applyUnregisterBroker: it leaves every ISR, its partitions keep it
// as a replica) and from the raft configuration, so the leader stops
// sending it the metadata log. Refused with ErrBrokerNotRemovable for a
// voter, an unfenced broker, or one heard from (registration or heartbeat)
// within the session timeout; an unknown id is ErrUnknownBroker.
func (c *Controller) UnregisterBroker(ctx context.Context, brokerID int32) error {
	if err := c.active(ctx); err != nil {
		return err
	}
	if c.isVoter(brokerID) {
		return fmt.Errorf("%w: broker %d is a controller (quorum voter)", ErrBrokerNotRemovable, brokerID)
	}
	b, ok := c.n.Image().Broker(brokerID)
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownBroker, brokerID)
	}
	if !b.Fenced {
		return fmt.Errorf("%w: broker %d is alive (unfenced)", ErrBrokerNotRemovable, brokerID)
	}
	c.mu.Lock()
	seen, heard := c.lastSeen[brokerID]
	c.mu.Unlock()
	if timeout := c.n.cfg.BrokerSessionTimeout; heard && time.Since(seen) <= timeout {
		return fmt.Errorf("%w: broker %d was heard from %v ago, within the session timeout %v",
			ErrBrokerNotRemovable, brokerID, time.Since(seen).Round(time.Millisecond), timeout)
	}
	_, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_UnregisterBroker{UnregisterBroker: &pb.UnregisterBroker{
		BrokerId: brokerID, BrokerEpoch: b.Epoch, Unclean: c.n.cfg.UncleanLeaderElection,
	}}})
	if err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.lastSeen, brokerID)
	c.mu.Unlock()
	c.n.logger.Warn("unregistered broker: removed from the image and every ISR", "broker", brokerID, "epoch", b.Epoch, "addr", b.Addr)
	// The controller loop's reconcileMembers removes it if this fails.
	c.removeMember(brokerID)
	return nil
}

// CommitOffsets commits a consumer group's offsets, all or none, and
// returns the commit time recorded with them: the coordinator's clock,
// which also judges when they expire (so that the clock of the node that
// took the commit does not), written into the command so that every node
// applies the same value. A commit that ValidateOffsetCommit refuses
// against the current image is answered without writing to the log. A
// commit from a group member (member.ID set) must be at its current
// epoch; one without a member is only for a group with no members
// (group.ValidateCommit).
func (c *Controller) CommitOffsets(ctx context.Context, group string, member GroupMember, offsets []OffsetCommit) (time.Time, error) {
	if err := c.active(ctx); err != nil {
		return time.Time{}, err
	}
	if err := ValidateOffsetCommit(c.n.Image(), group, offsets); err != nil {
		return time.Time{}, err
	}
	if err := c.validateCommit(ctx, group, member); err != nil {
		return time.Time{}, err
	}
	at := c.clock.Now().UnixMilli()
	cmd := &pb.CommitOffsets{Group: group, CommitTimeMs: at, Offsets: make([]*pb.OffsetCommit, len(offsets))}
	for i, o := range offsets {
		cmd.Offsets[i] = &pb.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	if c.n.Image().metadataVersion() >= MetadataVersionFencedCommits {
		// The FSM fences it again as it applies (fenceCommit).
		cmd.MemberId, cmd.MemberEpoch = member.ID, member.Epoch
	}
	if err := c.commits.commit(ctx, cmd); err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(at), nil
}

// readable waits until this node may answer a read from its image with
// every command committed so far: it is the active controller (whose
// ControllerChange, once applied, proves the earlier entries applied) and
// a quorum still follows it (raft's VerifyLeader), so that a controller cut
// off from the others, which has not noticed yet, does not answer from an
// image that misses a commit made through its successor.
func (c *Controller) readable(ctx context.Context) error {
	if err := c.active(ctx); err != nil {
		return err
	}
	f := c.n.raft.VerifyLeader()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNoQuorum, ctx.Err())
	}
	return c.leaderErr(err, ErrNoQuorum)
}

// FetchOffsets answers a group's committed offsets from the controller's
// image, which holds every acknowledged commit (see readable): those of
// the named partitions, -1 where never committed, or every committed one
// when none is named.
func (c *Controller) FetchOffsets(ctx context.Context, group string, partitions []TopicPartition) ([]CommittedOffset, error) {
	if err := c.readable(ctx); err != nil {
		return nil, err
	}
	return groupOffsets(c.n.Image(), group, partitions)
}

// GroupListing is one group of ListGroups: its id and the coordinator's
// state of it (group.GroupState's names; "empty" for a group with
// committed offsets only).
type GroupListing struct {
	Group string
	State string
}

// ListGroups lists the groups with committed offsets or members
// (Image.ListedGroups), from the controller's image for the same reason
// as FetchOffsets, each with its state from the coordinator.
func (c *Controller) ListGroups(ctx context.Context) ([]GroupListing, error) {
	if err := c.readable(ctx); err != nil {
		return nil, err
	}
	states, err := c.groupStates(ctx)
	if err != nil && !errors.Is(err, ErrUnsupportedVersion) { // none has members below metadata.version 2
		return nil, err
	}
	ids := c.n.Image().ListedGroups()
	out := make([]GroupListing, len(ids))
	for i, id := range ids {
		out[i] = GroupListing{Group: id, State: states[id].String()} // GroupEmpty when the machine has none
	}
	return out, nil
}

// DeleteGroup removes an empty group: its membership state and every
// committed offset. A group with members is group.ErrNonEmptyGroup; one
// with neither state nor offsets is ErrUnknownGroup.
func (c *Controller) DeleteGroup(ctx context.Context, group string) error {
	if err := c.active(ctx); err != nil {
		return err
	}
	if err := ValidateGroupID(group); err != nil {
		return err
	}
	_, hadState := c.n.Image().groupStates[group]
	if err := c.deleteGroupMembership(ctx, group); err != nil {
		return err
	}
	if _, ok := c.n.Image().groups[group]; !ok {
		if hadState {
			return nil
		}
		return fmt.Errorf("%w: %q has neither members nor committed offsets", ErrUnknownGroup, group)
	}
	_, err := c.raftApply(ctx, &pb.Command{Cmd: &pb.Command_DeleteGroup{DeleteGroup: &pb.DeleteGroup{Group: group}}})
	return err
}

// assignments turns replica lists into partition assignments numbered from
// first: the leader is the first live replica, the ISR the live replicas
// (all replicas when none is live, leader -1).
func assignments(img *Image, first int32, assign [][]int32) []*pb.PartitionAssignment {
	out := make([]*pb.PartitionAssignment, len(assign))
	for i, replicas := range assign {
		a := &pb.PartitionAssignment{Partition: first + int32(i), Replicas: replicas, Leader: -1}
		for _, r := range replicas {
			if img.isLive(r) {
				a.Isr = append(a.Isr, r)
			}
		}
		if len(a.Isr) == 0 {
			a.Isr = append([]int32(nil), replicas...)
		} else {
			a.Leader = a.Isr[0]
		}
		out[i] = a
	}
	return out
}

// NewTopicID returns a random 16-byte topic id in Kafka's base64url form.
func NewTopicID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("metadata: topic id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
