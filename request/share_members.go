package request

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/sharegroup"
)

// Share group members across nodes (docs/share-groups.md, "Membership
// across nodes"). A member heartbeats to one node and fetches from each
// partition's leader. A leader serves a member only if its group has
// it: it heartbeats here, or another node said so within the last
// shareMemberConfirmFor; otherwise the leader asks the other registered
// nodes (ShareCluster.ShareMember) and refuses the call
// UNKNOWN_MEMBER_ID when none has it, without asking again for
// shareMemberUnknownFor. A member that leaves or times out on its
// heartbeat node is told to every other node at once
// (ShareMembersLeft), which release what it holds there. A SHARED Subscribe stream's fetches and
// acknowledgements (Route) are passed on to the partitions' leaders.

// ErrShareMemberUnconfirmed: no other node said it has the member and
// some could not be asked; the call may be retried.
var ErrShareMemberUnconfirmed = errors.New("request: cannot confirm the share group member with the other nodes")

// shareMemberConfirmFor is how long a leader serves a member another
// node vouched for before asking again: the bound on how long a member
// whose departure was not told (its node failed meanwhile) keeps its
// records on a leader.
const shareMemberConfirmFor = 5 * time.Second

// shareMemberUnknownFor is how long a leader refuses a member no node
// had when last asked without asking again, so that a client fetching
// under an id no node has does not make the leader ask every node on
// each request. A member joining here ends it at once; one joining on
// another node is refused until it runs out, so it is kept short.
const shareMemberUnknownFor = time.Second

// shareExpireQuestions bounds the members ShareExpire asks the other
// nodes about at once (each question is one call to every other node).
const shareExpireQuestions = 16

// ShareCluster reaches the other nodes for the share groups.
type ShareCluster interface {
	// ShareMember asks the other registered nodes, fenced ones too,
	// whether member id heartbeats to one of them in group: true as soon
	// as one says so; false when every one said no (a fenced node that
	// cannot be reached gives no answer); an error when none said so and
	// some unfenced one could not be asked.
	ShareMember(ctx context.Context, group, id string) (bool, error)
	// ShareGroupHasMembers asks the other registered nodes whether some
	// member heartbeats to one of them in group, answering as
	// ShareMember.
	ShareGroupHasMembers(ctx context.Context, group string) (bool, error)
	// ShareMembersLeft tells the other live nodes that members left
	// their groups here, and returns once each has answered or could
	// not be reached.
	ShareMembersLeft(ctx context.Context, left []sharegroup.Departure)
	// ShareFetch has leader serve req for its partitions (not passed on
	// again), as the caller's principal.
	ShareFetch(ctx context.Context, leader int32, req *ShareFetchRequest) ([]ShareFetchResult, error)
	// ShareAcknowledge has leader apply acknowledgements to its
	// partitions, as the caller's principal; keyOrdered: the member asks
	// for the group's per-key ordering (ShareAcknowledgeKeyOrdered).
	ShareAcknowledge(ctx context.Context, leader int32, group, member string, keyOrdered bool, parts []SharePartition) ([]ShareAckResult, error)
}

// shareMember refuses a member the group does not have on any node.
func (c *Core) shareMember(ctx context.Context, sc *sharegroup.Coordinator, group, id string) error {
	now := c.cfg.Now()
	if c.cfg.ShareCluster == nil || sc.Known(now, group, id) {
		return nil // the coordinator refuses one it does not know
	}
	if id == "" {
		return c.fail(fmt.Errorf("%w: empty member id", sharegroup.ErrUnknownMember))
	}
	if sc.Unknown(now, group, id) {
		return c.fail(fmt.Errorf("%w: %q is not in share group %q on any node", sharegroup.ErrUnknownMember, id, group))
	}
	ok, err := c.cfg.ShareCluster.ShareMember(ctx, group, id)
	if err != nil {
		return c.fail(fmt.Errorf("%w: %q of share group %q: %v", ErrShareMemberUnconfirmed, id, group, err))
	}
	if !ok {
		// The others' "no" may be older than a vouch or a join here
		// made while they were asked (another fetch of the member):
		// then the member is served, and what it acquired under the
		// vouch kept. The mark runs from the answer, so that a slow
		// question does not leave it spent already.
		answered := c.cfg.Now()
		if !sc.ForgetUnknown(answered, group, id) {
			return nil
		}
		sc.MarkUnknown(answered, group, id, answered.Add(shareMemberUnknownFor))
		return c.fail(fmt.Errorf("%w: %q is not in share group %q on any node", sharegroup.ErrUnknownMember, id, group))
	}
	sc.Admit(now, group, id, now.Add(shareMemberConfirmFor))
	return nil
}

// shareTellDepartures tells the other nodes who left here.
func (c *Core) shareTellDepartures(ctx context.Context, left []sharegroup.Departure) {
	if len(left) > 0 && c.cfg.ShareCluster != nil {
		c.cfg.ShareCluster.ShareMembersLeft(ctx, left)
	}
}

// ShareExpire removes the share group members silent past the session
// timeout here and tells the other nodes, so that their records are
// released everywhere at once; and asks again about the members known
// here from their fetches whose confirmation ran out, forgetting those
// no node has (their heartbeat node failed, say). The broker calls it
// every second or so.
func (c *Core) ShareExpire(ctx context.Context) {
	sc := c.cfg.Shares
	if sc == nil {
		return
	}
	c.shareTellDepartures(ctx, sc.Expire(c.cfg.Now()))
	if c.cfg.ShareCluster == nil {
		return
	}
	// Asked at once (shareExpireQuestions at a time): a question waits
	// for every node's answer when none says yes, a fenced node that
	// is down answering only when its connection fails, and one after
	// another they would hold up the next round of expiry, and the
	// node's stop, by that much per member.
	slots := make(chan struct{}, shareExpireQuestions)
	var wg sync.WaitGroup
	for _, m := range sc.Unconfirmed(c.cfg.Now()) {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			ok, err := c.cfg.ShareCluster.ShareMember(ctx, m.Group, m.MemberID)
			switch {
			case ok:
				sc.Confirm(m.Group, m.MemberID, c.cfg.Now().Add(shareMemberConfirmFor))
			case err == nil:
				sc.ForgetUnknown(c.cfg.Now(), m.Group, m.MemberID)
			}
		}()
	}
	wg.Wait()
}

// ShareMemberHere answers another node's ShareMember: whether member id
// heartbeats to this node in group.
func (c *Core) ShareMemberHere(group, id string) bool {
	return c.cfg.Shares != nil && c.cfg.Shares.HasMember(c.cfg.Now(), group, id)
}

// ShareGroupMembersHere answers another node's ShareGroupHasMembers:
// whether some member heartbeats to this node in group.
func (c *Core) ShareGroupMembersHere(group string) bool {
	return c.cfg.Shares != nil && c.cfg.Shares.HasMembers(c.cfg.Now(), group)
}

// shareGroupEmpty refuses to delete the state of a share group with
// members: on this node (those heartbeating here, and those known here
// from their fetches), or heartbeating to another node; and, when some
// node could not be asked, one whose emptiness cannot be told (the
// caller may retry).
func (c *Core) shareGroupEmpty(ctx context.Context, sc *sharegroup.Coordinator, groupID string) error {
	if n := sc.LiveMembers(c.cfg.Now(), groupID); n > 0 {
		return c.fail(fmt.Errorf("%w: share group %q has %d members", group.ErrNonEmptyGroup, groupID, n))
	}
	if c.cfg.ShareCluster == nil {
		return nil
	}
	has, err := c.cfg.ShareCluster.ShareGroupHasMembers(ctx, groupID)
	if has {
		return c.fail(fmt.Errorf("%w: share group %q has members on another node", group.ErrNonEmptyGroup, groupID))
	}
	if err != nil {
		return c.fail(fmt.Errorf("%w: whether share group %q has members on another node: %v", ErrShareMemberUnconfirmed, groupID, err))
	}
	return nil
}

// ShareMembersGone takes another node's word that members left group:
// what they hold here is released.
func (c *Core) ShareMembersGone(group string, ids []string) {
	if c.cfg.Shares != nil {
		c.cfg.Shares.Forget(group, ids)
	}
}

// shareRoute splits the partitions of a routed call by leader: those led
// elsewhere by the image, by leader, and the rest (led here, or whose
// refusal this node answers).
func (c *Core) shareRoute(parts []SharePartition) (local []int, remote map[int32][]int) {
	for i, p := range parts {
		leader := int32(-1)
		if t, ok := c.cfg.Cluster.Topic(p.Topic); ok && p.Partition >= 0 && int(p.Partition) < len(t.Partitions) {
			leader = t.Partitions[p.Partition].Leader
		}
		if leader < 0 || leader == c.cfg.NodeID {
			local = append(local, i)
			continue
		}
		if remote == nil {
			remote = map[int32][]int{}
		}
		remote[leader] = append(remote[leader], i)
	}
	return local, remote
}

func pick(parts []SharePartition, idx []int) []SharePartition {
	out := make([]SharePartition, len(idx))
	for i, j := range idx {
		out[i] = parts[j]
	}
	return out
}

// shareRotate turns which leaders a fetch with less credit than leaders
// serves first.
var shareRotate atomic.Uint32

// shareCall is the part of a routed share fetch for one leader (-1:
// this node): the indexes of its partitions in the request.
type shareCall struct {
	leader int32
	idx    []int
}

// shareFetchRouted serves req's partitions at their leaders, the leaders
// at once, each with a share of MaxRecords by its partitions (so that
// they hand out no more than the credit together). With several leaders
// it first asks each without waiting, and answers at once what that
// acquired; only when nothing was there does it long-poll them all (the
// local long poll ending early when a leader elsewhere answered
// records): a leader's long poll would otherwise hold up what another
// had at once.
func (c *Core) shareFetchRouted(ctx context.Context, req *ShareFetchRequest) ([]ShareFetchResult, error) {
	if _, err := c.shares(req.Group); err != nil {
		return nil, err
	}
	if req.MaxWait < 0 || req.MaxRecords < 0 || len(req.Partitions) == 0 {
		r := *req
		r.Route = false
		return c.ShareFetch(ctx, &r) // its refusal
	}
	local, remote := c.shareRoute(req.Partitions)
	maxRecords := req.MaxRecords
	if maxRecords == 0 {
		maxRecords = DefaultShareMaxRecords
	}
	calls := make([]shareCall, 0, len(remote)+1)
	if len(local) > 0 {
		calls = append(calls, shareCall{-1, local})
	}
	for leader, idx := range remote {
		calls = append(calls, shareCall{leader, idx})
	}
	quota := make([]int, len(calls))
	given := 0
	for i, cl := range calls {
		quota[i] = maxRecords * len(cl.idx) / len(req.Partitions)
		given += quota[i]
	}
	for i := int(shareRotate.Add(1)); given < maxRecords; i++ {
		quota[i%len(calls)]++
		given++
	}
	if len(calls) == 1 || req.MaxWait == 0 {
		out, _ := c.shareFetchRound(ctx, req, calls, quota, req.MaxWait, true)
		return out, nil
	}
	out, got := c.shareFetchRound(ctx, req, calls, quota, 0, true)
	if got > 0 {
		return out, nil
	}
	again, _ := c.shareFetchRound(ctx, req, calls, quota, req.MaxWait, false)
	for i := range again {
		// The first round's acknowledgement answers stand.
		again[i].AckErr = out[i].AckErr
	}
	return again, nil
}

// shareFetchRound makes one round of a routed fetch, the leaders at
// once, and answers the results in request order and how many records
// were acquired; withAcks sends the partitions' acknowledgements too.
func (c *Core) shareFetchRound(ctx context.Context, req *ShareFetchRequest, calls []shareCall, quota []int, maxWait time.Duration, withAcks bool) ([]ShareFetchResult, int) {
	out := make([]ShareFetchResult, len(req.Partitions))
	early := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	var got atomic.Int64
	for i, cl := range calls {
		sub := &ShareFetchRequest{Group: req.Group, MemberID: req.MemberID, MaxWait: maxWait, MaxRecords: quota[i],
			Partitions: pick(req.Partitions, cl.idx), KeyOrdered: req.KeyOrdered}
		if !withAcks {
			for j := range sub.Partitions {
				sub.Partitions[j].Acks = nil
			}
		}
		if quota[i] == 0 {
			// No credit left for this leader this time: only its acks,
			// sent as an acknowledgement (a fetch of no records would
			// acquire DefaultShareMaxRecords).
			var acks []SharePartition
			var at []int
			for j, p := range sub.Partitions {
				if len(p.Acks) > 0 {
					acks = append(acks, p)
					at = append(at, cl.idx[j])
				}
			}
			for j, k := range cl.idx {
				out[k] = ShareFetchResult{Topic: sub.Partitions[j].Topic, Partition: sub.Partitions[j].Partition}
			}
			if len(acks) == 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var res []ShareAckResult
				var err error
				if cl.leader < 0 {
					res, err = c.shareAcknowledge(ctx, req.Group, req.MemberID, req.KeyOrdered, acks)
				} else {
					res, err = c.cfg.ShareCluster.ShareAcknowledge(ctx, cl.leader, req.Group, req.MemberID, req.KeyOrdered, acks)
				}
				for j, k := range at {
					switch {
					case err != nil:
						out[k].Err = c.shareForwardErr(err)
						out[k].AckErr = out[k].Err
					case j < len(res):
						out[k].AckErr = res[j].Err
					}
				}
			}()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res []ShareFetchResult
			var err error
			if cl.leader < 0 {
				sub.early = early
				res, err = c.ShareFetch(ctx, sub)
			} else {
				res, err = c.cfg.ShareCluster.ShareFetch(ctx, cl.leader, sub)
			}
			n := 0
			for _, r := range res {
				for _, a := range r.Acquired {
					n += int(a.Last - a.First + 1)
				}
			}
			if n > 0 {
				got.Add(int64(n))
				if cl.leader >= 0 {
					once.Do(func() { close(early) })
				}
			}
			type tp struct {
				topic string
				part  int32
			}
			byPart := map[tp]int{}
			for j, r := range res {
				byPart[tp{r.Topic, r.Partition}] = j
			}
			for _, k := range cl.idx {
				p := req.Partitions[k]
				r := ShareFetchResult{Topic: p.Topic, Partition: p.Partition}
				if err != nil {
					r.Err = c.shareForwardErr(err)
					if withAcks && len(p.Acks) > 0 {
						r.AckErr = r.Err
					}
				} else if at, ok := byPart[tp{p.Topic, p.Partition}]; ok {
					r = res[at]
				}
				out[k] = r
			}
		}()
	}
	wg.Wait()
	return out, int(got.Load())
}

// shareForwardErr is a leader's refusal as this node answers it: the
// leader's own, or LeaderUnreachable when the call did not get through.
func (c *Core) shareForwardErr(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return c.fail(fmt.Errorf("%w: %v", ErrLeaderUnreachable, err))
}

// ShareAcknowledgeRouted is ShareAcknowledge with each partition's
// acknowledgements applied at its leader, wherever it is (a SHARED
// Subscribe stream's); keyOrdered: the member asks for the group's
// per-key ordering (ShareAcknowledgeKeyOrdered).
func (c *Core) ShareAcknowledgeRouted(ctx context.Context, group, member string, keyOrdered bool, parts []SharePartition) ([]ShareAckResult, error) {
	if _, err := c.shares(group); err != nil {
		return nil, err
	}
	local, remote := c.shareRoute(parts)
	if len(remote) == 0 || c.cfg.ShareCluster == nil {
		return c.shareAcknowledge(ctx, group, member, keyOrdered, parts)
	}
	out := make([]ShareAckResult, len(parts))
	var wg sync.WaitGroup
	run := func(leader int32, idx []int) {
		defer wg.Done()
		var res []ShareAckResult
		var err error
		if leader < 0 {
			res, err = c.shareAcknowledge(ctx, group, member, keyOrdered, pick(parts, idx))
		} else {
			res, err = c.cfg.ShareCluster.ShareAcknowledge(ctx, leader, group, member, keyOrdered, pick(parts, idx))
		}
		for j, k := range idx {
			out[k] = ShareAckResult{Topic: parts[k].Topic, Partition: parts[k].Partition}
			switch {
			case err != nil:
				out[k].Err = c.shareForwardErr(err)
			case j < len(res):
				out[k].Err = res[j].Err
			}
		}
	}
	if len(local) > 0 {
		wg.Add(1)
		go run(-1, local)
	}
	for leader, idx := range remote {
		wg.Add(1)
		go run(leader, idx)
	}
	wg.Wait()
	return out, nil
}
