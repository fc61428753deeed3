package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	pb "github.com/quirelog/quire/api/internalv1"
	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/storage"
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
	part, ok := b.rm.Partition(topic, partition)
	if !ok {
		return d
	}
	st := part.State()
	d.Hosted = true
	d.Leader = st.Leader
	d.LeaderEpoch = st.LeaderEpoch
	d.LogStartOffset = part.LogStartOffset()
	d.HighWatermark = part.HighWatermark()
	d.LogEndOffset = part.LogEndOffset()
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

// ReplicaFetch is a follower's pull (see replica.proto), answered by the
// replica manager (replica.Manager.HandleFetch).
func (s *replicaService) ReplicaFetch(ctx context.Context, req *pb.ReplicaFetchRequest) (*pb.ReplicaFetchResponse, error) {
	resp, err := s.b.rm.HandleFetch(ctx, fetchRequestFromPB(req))
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, toStatus(err)
	}
	return fetchResponseToPB(resp), nil
}

func fetchRequestFromPB(req *pb.ReplicaFetchRequest) *replica.FetchRequest {
	out := &replica.FetchRequest{ReplicaID: req.GetReplicaId(), Incarnation: req.GetIncarnation(), MaxWaitMs: req.GetMaxWaitMs(),
		MinBytes: req.GetMinBytes(), MaxBytes: req.GetMaxBytes(), Partitions: make([]replica.FetchPartition, len(req.GetPartitions()))}
	for i, f := range req.GetPartitions() {
		out.Partitions[i] = replica.FetchPartition{Topic: f.GetTopic(), Partition: f.GetPartition(), CurrentLeaderEpoch: f.GetCurrentLeaderEpoch(),
			FetchOffset: f.GetFetchOffset(), LastFetchedEpoch: f.GetLastFetchedEpoch(), PartitionMaxBytes: f.GetPartitionMaxBytes()}
	}
	return out
}

func fetchRequestToPB(req *replica.FetchRequest) *pb.ReplicaFetchRequest {
	out := &pb.ReplicaFetchRequest{ReplicaId: req.ReplicaID, Incarnation: req.Incarnation, MaxWaitMs: req.MaxWaitMs,
		MinBytes: req.MinBytes, MaxBytes: req.MaxBytes, Partitions: make([]*pb.ReplicaFetchPartition, len(req.Partitions))}
	for i, f := range req.Partitions {
		out.Partitions[i] = &pb.ReplicaFetchPartition{Topic: f.Topic, Partition: f.Partition, CurrentLeaderEpoch: f.CurrentLeaderEpoch,
			FetchOffset: f.FetchOffset, LastFetchedEpoch: f.LastFetchedEpoch, PartitionMaxBytes: f.PartitionMaxBytes}
	}
	return out
}

func fetchResponseToPB(resp *replica.FetchResponse) *pb.ReplicaFetchResponse {
	out := &pb.ReplicaFetchResponse{Partitions: make([]*pb.ReplicaFetchPartitionResult, len(resp.Partitions))}
	for i, r := range resp.Partitions {
		pr := &pb.ReplicaFetchPartitionResult{Topic: r.Topic, Partition: r.Partition, Records: r.Records,
			HighWatermark: r.HighWatermark, LogStartOffset: r.LogStartOffset, LogEndOffset: r.LogEndOffset}
		if r.Diverging != nil {
			pr.DivergingEpoch = &pb.EpochEndOffset{Epoch: r.Diverging.Epoch, EndOffset: r.Diverging.EndOffset}
		}
		if r.Err != nil {
			e := toError(r.Err)
			pr.ErrorCode, pr.ErrorMessage = int32(e.Code), e.Message
		}
		out.Partitions[i] = pr
	}
	return out
}

// errLeaderRefused is a partition of a replica fetch the leader refused
// (its code and message are in the error's text).
var errLeaderRefused = errors.New("broker: the leader refused the replica fetch")

func fetchResponseFromPB(resp *pb.ReplicaFetchResponse) *replica.FetchResponse {
	out := &replica.FetchResponse{Partitions: make([]replica.FetchResult, len(resp.GetPartitions()))}
	for i, r := range resp.GetPartitions() {
		fr := replica.FetchResult{Topic: r.GetTopic(), Partition: r.GetPartition(), Records: r.GetRecords(),
			HighWatermark: r.GetHighWatermark(), LogStartOffset: r.GetLogStartOffset(), LogEndOffset: r.GetLogEndOffset()}
		if d := r.GetDivergingEpoch(); d != nil {
			fr.Diverging = &replica.EpochEndOffset{Epoch: d.GetEpoch(), EndOffset: d.GetEndOffset()}
		}
		switch code := quirev1.ErrorCode(r.GetErrorCode()); code {
		case quirev1.ErrorCode_NONE:
		case quirev1.ErrorCode_OFFSET_OUT_OF_RANGE:
			fr.Err = fmt.Errorf("%w: %s", storage.ErrOffsetOutOfRange, r.GetErrorMessage())
		default:
			fr.Err = fmt.Errorf("%w: %s: %s", errLeaderRefused, code, r.GetErrorMessage())
		}
		out.Partitions[i] = fr
	}
	return out
}
