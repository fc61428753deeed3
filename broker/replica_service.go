package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
)

// replicaService implements quire.internal.v1.ReplicaService: node-to-node
// calls answered from the replicas this broker hosts. (Replication's
// follower fetch joins it.)
type replicaService struct {
	pb.UnimplementedReplicaServiceServer
	b *Broker
}

// DescribeLogs answers the offsets of the named replicas hosted here.
func (s *replicaService) DescribeLogs(ctx context.Context, req *pb.DescribeLogsRequest) (*pb.DescribeLogsResponse, error) {
	resp := &pb.DescribeLogsResponse{Logs: make([]*pb.LogDescription, 0, len(req.Partitions))}
	for _, ref := range req.Partitions {
		resp.Logs = append(resp.Logs, s.b.describeLog(ref.GetTopic(), ref.GetPartition()))
	}
	return resp, nil
}

// describeLog is this broker's view of one replica's offsets.
func (b *Broker) describeLog(topic string, partition int32) *pb.LogDescription {
	d := &pb.LogDescription{Topic: topic, Partition: partition, LogStartOffset: -1, HighWatermark: -1, LogEndOffset: -1}
	part, ok := b.rm.partition(topic, partition)
	if !ok {
		return d
	}
	st := part.state()
	d.Hosted = true
	d.Leader = st.leader
	d.LeaderEpoch = st.leaderEpoch
	d.LogStartOffset = part.log.LogStartOffset()
	d.HighWatermark = part.HighWatermark()
	d.LogEndOffset = part.log.LogEndOffset()
	return d
}

// describeLogsTimeout bounds how long DescribeTopics waits for the leaders
// it asks for their offsets; a leader that does not answer in time shows
// -1.
const describeLogsTimeout = 2 * time.Second

// describeTopics describes topics with the offsets of every partition as
// its leader knows them: this broker's own replicas directly, every other
// leader asked at once with DescribeLogs (one call per leader, within
// describeLogsTimeout). Partitions without a leader, or whose leader could
// not be asked or no longer leads them, show -1.
func (b *Broker) describeTopics(ctx context.Context, img *metadata.Image, topics []metadata.TopicInfo) []*quirev1.TopicDescription {
	out := make([]*quirev1.TopicDescription, 0, len(topics))
	remote := map[int32][]*quirev1.PartitionDescription{}
	refs := map[int32][]*pb.LogPartitionRef{}
	self := b.cfg.NodeID
	for _, t := range topics {
		d := &quirev1.TopicDescription{Name: t.Name, TopicId: t.ID, Configs: t.Configs}
		for _, p := range t.Partitions {
			pd := &quirev1.PartitionDescription{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, Isr: p.ISR,
				LogStartOffset: -1, HighWatermark: -1, LogEndOffset: -1,
			}
			switch {
			case p.Leader < 0:
			case p.Leader == self:
				setOffsets(pd, b.describeLog(t.Name, p.Partition))
			default:
				remote[p.Leader] = append(remote[p.Leader], pd)
				refs[p.Leader] = append(refs[p.Leader], &pb.LogPartitionRef{Topic: t.Name, Partition: p.Partition})
			}
			d.Partitions = append(d.Partitions, pd)
		}
		out = append(out, d)
	}
	if len(remote) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, describeLogsTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for leader, pds := range remote {
		br, ok := img.Broker(leader)
		if !ok || br.Addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			logs, err := b.cluster.describeLogs(ctx, br.Addr, refs[leader])
			if err != nil {
				b.logger.Debug("cannot ask a partition leader for its offsets", "broker", leader, "addr", br.Addr, "error", err)
				return
			}
			for i, pd := range pds {
				if i < len(logs) {
					setOffsets(pd, logs[i])
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// setOffsets copies a leader's offsets into pd; a replica not hosted or
// not led there (leadership moved since the image) leaves -1.
func setOffsets(pd *quirev1.PartitionDescription, l *pb.LogDescription) {
	if l == nil || !l.Hosted || !l.Leader || l.Partition != pd.Partition {
		return
	}
	pd.LogStartOffset, pd.HighWatermark, pd.LogEndOffset = l.LogStartOffset, l.HighWatermark, l.LogEndOffset
}

// describeLogs asks the broker at addr for the offsets of refs, over the
// node-to-node connection to it.
func (c *cluster) describeLogs(ctx context.Context, addr string, refs []*pb.LogPartitionRef) ([]*pb.LogDescription, error) {
	cc, err := c.peer(addr)
	if err != nil {
		return nil, err
	}
	resp, err := pb.NewReplicaServiceClient(cc).DescribeLogs(ctx, &pb.DescribeLogsRequest{Partitions: refs})
	if err != nil {
		return nil, fmt.Errorf("broker: describe logs at %s: %w", addr, err)
	}
	if len(resp.Logs) != len(refs) {
		return nil, fmt.Errorf("broker: describe logs at %s: %d answers for %d partitions", addr, len(resp.Logs), len(refs))
	}
	return resp.Logs, nil
}

// peer returns the cached node-to-node connection to addr (dialled with
// dialOptions, so Config.Dialer applies), opening it on first use. They
// are closed by close.
func (c *cluster) peer(addr string) (*grpc.ClientConn, error) {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	if c.peersClosed {
		return nil, ErrShuttingDown
	}
	if cc, ok := c.peers[addr]; ok {
		return cc, nil
	}
	cc, err := c.dial(addr)
	if err != nil {
		return nil, fmt.Errorf("broker: dial %s: %w", addr, err)
	}
	if c.peers == nil {
		c.peers = map[string]*grpc.ClientConn{}
	}
	c.peers[addr] = cc
	return cc, nil
}

// closePeers closes the connections peer opened.
func (c *cluster) closePeers() error {
	c.peersMu.Lock()
	peers := c.peers
	c.peers, c.peersClosed = nil, true
	c.peersMu.Unlock()
	var first error
	for _, cc := range peers {
		if err := cc.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// maxReplicaFetchWait caps a follower's long poll.
const maxReplicaFetchWait = 30 * time.Second

// ReplicaFetch is a follower's pull (see replica.proto). Each partition
// first records the fetch offset as the follower's LEO (which may move the
// HW and add the follower back to the ISR); then the batches from there are
// read, past the HW, and the call long-polls for new appends while fewer
// than min_bytes came back.
func (s *replicaService) ReplicaFetch(ctx context.Context, req *pb.ReplicaFetchRequest) (*pb.ReplicaFetchResponse, error) {
	if len(req.GetPartitions()) == 0 {
		return nil, toStatus(fmt.Errorf("%w: replica fetch names no partitions", ErrInvalidRequest))
	}
	if id := req.GetReplicaId(); id < 0 || id == s.b.cfg.NodeID {
		return nil, toStatus(fmt.Errorf("%w: replica fetch from broker %d", ErrInvalidRequest, id))
	}
	if reg := s.b.rm.registered; reg != nil {
		if r, ok := reg(req.GetReplicaId()); !ok || r.incarnation != req.GetIncarnation() {
			return nil, toStatus(fmt.Errorf("%w: replica fetch from broker %d is not from its registered incarnation",
				ErrStaleBrokerEpoch, req.GetReplicaId()))
		}
	}
	if req.GetMaxBytes() < 0 || req.GetMinBytes() < 0 || req.GetMaxWaitMs() < 0 {
		return nil, toStatus(fmt.Errorf("%w: negative max_bytes, min_bytes or max_wait_ms", ErrInvalidRequest))
	}
	now := time.Now()
	resp := &pb.ReplicaFetchResponse{Partitions: make([]*pb.ReplicaFetchPartitionResult, len(req.Partitions))}
	parts := make([]*Partition, len(req.Partitions))
	stop := false // an error or a divergence answers at once
	for i, f := range req.Partitions {
		r := &pb.ReplicaFetchPartitionResult{Topic: f.GetTopic(), Partition: f.GetPartition(), HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}
		resp.Partitions[i] = r
		part, ok := s.b.rm.partition(f.GetTopic(), f.GetPartition())
		if !ok {
			setFetchError(r, unknownPartition(f.GetTopic(), f.GetPartition()))
			stop = true
			continue
		}
		div, err := part.followerFetch(req.ReplicaId, f, now)
		setLogOffsets(r, part)
		switch {
		case err != nil:
			setFetchError(r, err)
			stop = true
		case div != nil:
			r.DivergingEpoch = div
			stop = true
		default:
			parts[i] = part
		}
	}
	wake := make(chan struct{}, 1)
	for _, part := range parts {
		if part != nil {
			part.watchLEO(wake)
			defer part.unwatchLEO(wake)
		}
	}
	wait := time.NewTimer(min(time.Duration(req.GetMaxWaitMs())*time.Millisecond, maxReplicaFetchWait))
	defer wait.Stop()
	for {
		n := s.readForFollower(req, parts, resp)
		if stop || n >= int(req.GetMinBytes()) || req.GetMaxWaitMs() == 0 {
			return resp, nil
		}
		select {
		case <-wake:
		case <-wait.C:
			stop = true
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-s.b.stop:
			stop = true
		}
	}
}

// readForFollower fills in the records of every partition being read and
// returns the bytes read; a partition no longer led here gets its error.
func (s *replicaService) readForFollower(req *pb.ReplicaFetchRequest, parts []*Partition, resp *pb.ReplicaFetchResponse) int {
	maxBytes := int(req.GetMaxBytes())
	if maxBytes == 0 {
		maxBytes = maxFetchResponseBytes
	}
	maxBytes = min(maxBytes, maxFetchResponseBytes)
	total := 0
	for i, part := range parts {
		if part == nil {
			continue
		}
		f, r := req.Partitions[i], resp.Partitions[i]
		r.Records = nil
		limit := readLimit(int(f.GetPartitionMaxBytes()), maxBytes, total)
		if st := part.state(); !st.leader || st.leaderEpoch != f.GetCurrentLeaderEpoch() {
			setFetchError(r, &notLeaderError{topic: part.topic, partition: part.id, leader: st.leaderID, epoch: st.leaderEpoch})
			parts[i] = nil
			continue
		}
		if limit > 0 {
			res, err := part.readForFollower(f.GetFetchOffset(), limit)
			if err != nil {
				setFetchError(r, err)
				parts[i] = nil
				continue
			}
			r.Records = res.Batches
			total += len(res.Batches)
		}
		setLogOffsets(r, part)
	}
	return total
}

func setLogOffsets(r *pb.ReplicaFetchPartitionResult, part *Partition) {
	r.HighWatermark, r.LogStartOffset, r.LogEndOffset = part.HighWatermark(), part.log.LogStartOffset(), part.log.LogEndOffset()
}

func setFetchError(r *pb.ReplicaFetchPartitionResult, err error) {
	e := toError(err)
	r.ErrorCode, r.ErrorMessage = int32(e.Code), e.Message
}
