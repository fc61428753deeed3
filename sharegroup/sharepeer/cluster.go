// Package sharepeer is the share groups' side of the node-to-node
// calls: the request core's ShareCluster over the connections to the
// other nodes (Cluster), and the answers to theirs (Server). A member
// heartbeats to one node and fetches from each partition's leader; a
// leader asks the other nodes whether they have a member it does not
// know (ShareMember), a node tells the others who left its groups
// (ShareMembersLeft), and a SHARED Subscribe stream's node passes its
// share fetches and acknowledgements on to the partitions' leaders
// (ShareFetch, ShareAcknowledge). See request/share_members.go.
//
// It reaches the node only through Node: the brokers of its metadata
// image and a connection to each.
package sharepeer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/service"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
)

// PeerTimeout bounds a membership question or notice to one node: a
// node that does not answer in time is taken as not having the member.
const PeerTimeout = 5 * time.Second

// Node is what the share calls need of this node.
type Node interface {
	// Brokers are the brokers registered in this node's metadata image.
	Brokers() []metadata.BrokerInfo
	// Conn is the node-to-node connection to broker id; an error
	// (wrapping request.ErrLeaderUnreachable) when there is none.
	Conn(id int32) (grpc.ClientConnInterface, error)
}

// Config is a Cluster's.
type Config struct {
	// NodeID is this node's broker id: the calls it passes on are
	// marked as passed on by it, and it does not ask itself.
	NodeID int32
	Node   Node
	// Logger, nil for none.
	Logger hclog.Logger
}

// Cluster is request.ShareCluster over the node-to-node connections.
type Cluster struct {
	cfg Config
}

// New returns a Cluster over cfg.Node.
func New(cfg Config) *Cluster {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Cluster{cfg: cfg}
}

var _ request.ShareCluster = (*Cluster)(nil)

// peer is another registered broker, and whether the image has it
// fenced.
type peer struct {
	id     int32
	fenced bool
}

// peers are the other registered brokers with an address; the fenced
// ones too with fenced.
func (c *Cluster) peers(fenced bool) []peer {
	var out []peer
	for _, br := range c.cfg.Node.Brokers() {
		if br.ID != c.cfg.NodeID && br.Addr != "" && (fenced || !br.Fenced) {
			out = append(out, peer{id: br.ID, fenced: br.Fenced})
		}
	}
	return out
}

// ShareMember asks the other brokers at once whether member id
// heartbeats to one of them in group.
func (c *Cluster) ShareMember(ctx context.Context, group, id string) (bool, error) {
	return c.ask(ctx, &pb.ShareMemberRequest{Group: group, MemberId: id})
}

// ShareGroupHasMembers asks every other broker at once whether a member
// of group heartbeats to it.
func (c *Cluster) ShareGroupHasMembers(ctx context.Context, group string) (bool, error) {
	return c.ask(ctx, &pb.ShareMemberRequest{Group: group, AnyMember: true})
}

// ask asks every other registered broker at once: true as soon as one
// says yes. A fenced broker is asked too: a member's heartbeat node may
// be fenced a moment (a late heartbeat to the controller) while its
// members go on, and taking them as unknown would release their
// records. Its answer counts as any other's, but when it cannot be
// reached it gives no answer, neither a yes nor a reason to doubt the
// others' no (it was fenced because it stopped, most likely); an
// unfenced broker that cannot be reached leaves the question open (an
// error). So does a question its caller gave up on (ctx ended): the
// fenced brokers' calls failed for that, not for being down.
func (c *Cluster) ask(caller context.Context, req *pb.ShareMemberRequest) (bool, error) {
	peers := c.peers(true)
	if len(peers) == 0 {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(caller, PeerTimeout)
	defer cancel()
	type answer struct {
		yes bool
		err error
	}
	answers := make(chan answer, len(peers))
	for _, p := range peers {
		go func() {
			cc, err := c.cfg.Node.Conn(p.id)
			if err == nil {
				var resp *pb.ShareMemberResponse
				if resp, err = pb.NewReplicaServiceClient(cc).ShareMember(ctx, req); err == nil {
					answers <- answer{yes: resp.Member}
					return
				}
			}
			if p.fenced {
				err = nil // no answer
			}
			answers <- answer{err: err}
		}()
	}
	var errs []error
	for range peers {
		a := <-answers
		if a.yes {
			return true, nil // the others' answers go to the buffer
		}
		if a.err != nil {
			errs = append(errs, a.err)
		}
	}
	if err := caller.Err(); err != nil {
		return false, err
	}
	return false, errors.Join(errs...)
}

// ShareMembersLeft tells every other unfenced broker at once. A fenced
// one is not told: it may well be down, and a leave would wait on it;
// it releases what they hold there when its confirmation of them runs
// out, as any broker not told does.
func (c *Cluster) ShareMembersLeft(ctx context.Context, left []sharegroup.Departure) {
	in := &pb.ShareMembersLeftRequest{}
	for _, d := range left {
		in.Left = append(in.Left, &pb.ShareDeparture{Group: d.Group, MemberId: d.MemberID})
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PeerTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range c.peers(false) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc, err := c.cfg.Node.Conn(p.id)
			if err == nil {
				_, err = pb.NewReplicaServiceClient(cc).ShareMembersLeft(ctx, in)
			}
			if err != nil {
				// It releases them when its confirmation of them runs out.
				c.cfg.Logger.Debug("cannot tell a broker that share group members left", "broker", p.id, "error", err)
			}
		}()
	}
	wg.Wait()
}

// ShareFetch passes a share fetch on to leader as the caller's principal.
func (c *Cluster) ShareFetch(ctx context.Context, leader int32, req *request.ShareFetchRequest) ([]request.ShareFetchResult, error) {
	cc, err := c.cfg.Node.Conn(leader)
	if err != nil {
		return nil, err
	}
	in := &pb.PeerShareFetchRequest{Principal: request.Principal(ctx), Group: req.Group, MemberId: req.MemberID,
		MaxWaitMs: int32(req.MaxWait.Milliseconds()), MaxRecords: int32(req.MaxRecords), Partitions: toWire(req.Partitions),
		KeyOrdered: req.KeyOrdered}
	resp, err := pb.NewReplicaServiceClient(cc).ShareFetch(service.ForwardContext(ctx, c.cfg.NodeID), in, grpc.MaxCallRecvMsgSize(request.MaxSendBytes))
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, service.FromError(resp.Error)
	}
	out := make([]request.ShareFetchResult, len(resp.Partitions))
	for i, p := range resp.Partitions {
		r := request.ShareFetchResult{Topic: p.Topic, Partition: p.Partition, Records: p.Records,
			AckErr: service.FromError(p.AckError), Err: service.FromError(p.Error)}
		for _, a := range p.Acquired {
			r.Acquired = append(r.Acquired, share.AcquiredRange{First: a.First, Last: a.Last, DeliveryCount: int(a.DeliveryCount)})
		}
		out[i] = r
	}
	return out, nil
}

// ShareAcknowledge passes acknowledgements on to leader as the caller's
// principal.
func (c *Cluster) ShareAcknowledge(ctx context.Context, leader int32, group, member string, keyOrdered bool, parts []request.SharePartition) ([]request.ShareAckResult, error) {
	cc, err := c.cfg.Node.Conn(leader)
	if err != nil {
		return nil, err
	}
	in := &pb.PeerShareAckRequest{Principal: request.Principal(ctx), Group: group, MemberId: member, Partitions: toWire(parts),
		KeyOrdered: keyOrdered}
	resp, err := pb.NewReplicaServiceClient(cc).ShareAcknowledge(service.ForwardContext(ctx, c.cfg.NodeID), in)
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, service.FromError(resp.Error)
	}
	out := make([]request.ShareAckResult, len(resp.Partitions))
	for i, p := range resp.Partitions {
		out[i] = request.ShareAckResult{Topic: p.Topic, Partition: p.Partition, Err: service.FromError(p.Error)}
	}
	return out, nil
}

func toWire(parts []request.SharePartition) []*pb.PeerSharePartition {
	out := make([]*pb.PeerSharePartition, len(parts))
	for i, p := range parts {
		pp := &pb.PeerSharePartition{Topic: p.Topic, Partition: p.Partition}
		for _, a := range p.Acks {
			pp.Acks = append(pp.Acks, &pb.PeerShareAck{First: a.First, Last: a.Last, Type: int32(a.Type)})
		}
		out[i] = pp
	}
	return out
}

func fromWire(parts []*pb.PeerSharePartition) []request.SharePartition {
	out := make([]request.SharePartition, len(parts))
	for i, p := range parts {
		sp := request.SharePartition{Topic: p.Topic, Partition: p.Partition}
		for _, a := range p.Acks {
			sp.Acks = append(sp.Acks, share.Ack{First: a.First, Last: a.Last, Type: share.AckType(a.Type)})
		}
		out[i] = sp
	}
	return out
}
