package request

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quirelog/quire/auth"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/replica"
)

// DefaultProduceTimeout is how long a produce waits for its acks when
// the request does not say.
const DefaultProduceTimeout = 30 * time.Second

// forwardMargin is how much sooner than the caller's deadline a leader is
// asked to give up waiting for acks, so that its REQUEST_TIMED_OUT (or
// success) comes back rather than the passed-on call timing out with the
// outcome unknown.
const forwardMargin = 250 * time.Millisecond

// ProduceRequest appends record batches, as the client sent them, to
// partitions.
type ProduceRequest struct {
	// Acks is -1 (all in-sync replicas), 0 (no answer) or 1 (the leader).
	Acks int32
	// Timeout bounds the wait for acks; 0 is DefaultProduceTimeout.
	Timeout    time.Duration
	Partitions []ProducePartition
	// Route passes the partitions another broker leads on to it; without,
	// they are answered NOT_LEADER_OR_FOLLOWER. A door sets it for a
	// client's own request, never for one a broker passed on.
	Route bool
	// Received is when the door received the request (the zero time:
	// not timed).
	Received time.Time
	// TransactionalID is the transactional id of a transactional
	// producer's batches: on a partition where the producer has no
	// transaction open yet, the leader adds the partition to the
	// producer's transaction at the coordinator (KIP-890's implicit add),
	// or with VerifyPartitions only checks that the producer added it.
	TransactionalID  string
	VerifyPartitions bool
}

// ProducePartition is one partition's batches.
type ProducePartition struct {
	Topic     string
	Partition int32
	Records   []byte
}

// ProduceResult is one partition's answer, in request order.
type ProduceResult struct {
	Topic      string
	Partition  int32
	BaseOffset int64 // -1 when not appended (or not known: acks=0)
	LastOffset int64
	// LogAppendTime is the time the broker stamped on the batches, or -1
	// when they keep the producer's (CreateTime).
	LogAppendTime  int64
	LogStartOffset int64
	// Err is an *Error, or nil.
	Err error
}

// pendingAck is an acks=all append waiting to be on every in-sync
// replica.
type pendingAck struct {
	part   *replica.Partition
	append replica.AppendResult
	result *ProduceResult
}

// Produced is a produce whose appends are done, its acks=all waits still
// to come (Wait): a pipelining door appends the requests behind it first.
type Produced struct {
	c *Core
	// deadline is the request's Timeout from the start of its appends.
	deadline time.Time
	results  []ProduceResult
	pending  []pendingAck
	// one and onePending are results and pending for a request of one
	// partition (most are), in the Produced's own allocation.
	one        [1]ProduceResult
	onePending [1]pendingAck
}

// Pending reports whether Wait has acks to wait for.
func (p *Produced) Pending() bool { return len(p.pending) > 0 }

// Wait waits, within ctx and the request's Timeout, until each acks=all
// append is below the HW, turning those that do not make it into errors,
// and returns every partition's answer.
func (p *Produced) Wait(ctx context.Context) []ProduceResult {
	if len(p.pending) == 0 {
		return p.results
	}
	ctx, cancel := context.WithDeadline(ctx, p.deadline)
	defer cancel()
	for _, pa := range p.pending {
		if err := p.c.awaitReplicated(ctx, pa); err != nil {
			// Appended, then not known to be committed.
			e := *p.c.asError(err)
			e.OutcomeUnknown = true
			pa.result.Err = &e
		}
	}
	p.pending = nil
	return p.results
}

// Produce appends each partition's batches (here, or at its leader with
// Route) and answers once acks are satisfied or the timeout passes. An
// error is the whole request's (refused, malformed); each partition's
// own is in its result.
func (c *Core) Produce(ctx context.Context, req *ProduceRequest) ([]ProduceResult, error) {
	p, err := c.Append(ctx, req)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx), nil
}

func produceTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultProduceTimeout
	}
	return d
}

// Append is Produce up to its acks=all waits: it checks and authorizes
// the request, appends every partition led here, in request order, and
// has the others appended by their leaders (Route), within ctx and the
// request's Timeout, which runs from here to the end of Wait. Neither the
// request nor its batches are kept: they may be reused once it returns.
func (c *Core) Append(ctx context.Context, req *ProduceRequest) (*Produced, error) {
	if err := c.checkProduce(ctx, req); err != nil {
		return nil, err
	}
	return c.append(ctx, req)
}

// append is Append of a request checked and authorized.
// The request's timeout is a deadline here, made a context only where
// something waits (a topic created, a leader elsewhere, acks=all): most
// produces wait for nothing, and a context with a deadline costs a timer
// and four allocations.
func (c *Core) append(ctx context.Context, req *ProduceRequest) (*Produced, error) {
	p := &Produced{c: c, deadline: time.Now().Add(produceTimeout(req.Timeout))}
	if len(req.Partitions) == 1 {
		p.results, p.pending = p.one[:], p.onePending[:0]
	} else {
		p.results = make([]ProduceResult, len(req.Partitions))
	}
	var fws []forward
	for i, pp := range req.Partitions {
		res := &p.results[i]
		*res = ProduceResult{Topic: pp.Topic, Partition: pp.Partition, BaseOffset: -1, LastOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
		pa, err := c.appendOne(ctx, p.deadline, req, pp.Topic, pp.Partition, pp.Records, res)
		if err != nil {
			if leader, ok := c.routeTo(req.Route, err); ok {
				fws = append(fws, forward{leader: leader, index: i, notHere: err})
				continue
			}
			res.Err = c.fail(err)
			continue
		}
		if req.Acks == -1 {
			p.pending = append(p.pending, pa)
		}
	}
	c.runForwards(ctx, p.deadline, req, fws, p.results)
	return p, nil
}

// checkProduce refuses what is wrong with a produce as a whole, and what
// the caller may not do: Write on each topic, and Create on each it would
// create.
func (c *Core) checkProduce(ctx context.Context, req *ProduceRequest) error {
	switch req.Acks {
	case -1, 0, 1:
	default:
		return c.fail(fmt.Errorf("%w: acks must be -1 (all), 0 or 1, not %d", ErrInvalidRequiredAcks, req.Acks))
	}
	if len(req.Partitions) == 0 {
		return c.fail(fmt.Errorf("%w: no partitions", replica.ErrInvalidRequest))
	}
	return c.authorizeEach(ctx, auth.OpWrite, len(req.Partitions), func(i int) string { return req.Partitions[i].Topic }, func(t string) bool {
		if c.cfg.Creator == nil {
			return false
		}
		_, ok := c.cfg.Cluster.Topic(t)
		return !ok
	})
}

// appendOne appends raw batches to one partition and fills res. The
// returned pendingAck is what an acks=all caller waits on. The time from
// received (zero: not timed) to the start of the append is the produce
// queue time; a topic created for it is waited for until deadline.
func (c *Core) appendOne(ctx context.Context, deadline time.Time, req *ProduceRequest, topic string, p int32, batches []byte, res *ProduceResult) (pendingAck, error) {
	acks, received := req.Acks, req.Received
	if len(batches) == 0 {
		return pendingAck{}, fmt.Errorf("%w: %s-%d: no records", replica.ErrInvalidRequest, topic, p)
	}
	if acks != -1 {
		if err := checkIdempotentAcks(topic, p, batches, acks); err != nil {
			return pendingAck{}, err
		}
	}
	part, ok := c.cfg.Replicas.Partition(topic, p)
	if !ok {
		var err error
		if part, err = c.leaderPartitionBy(ctx, deadline, topic, p); err != nil {
			return pendingAck{}, err
		}
	}
	if c.cfg.Cluster.SessionLost() {
		// Cut off from the controller past the session timeout: another
		// broker leads this partition by now, or is about to.
		return pendingAck{}, fmt.Errorf("%w: %s-%d: this broker has not reached the controller for broker.session.timeout.ms and may have been replaced as leader",
			replica.ErrLeaderNotAvailable, topic, p)
	}
	if err := c.checkTransactional(ctx, req, part, batches); err != nil {
		return pendingAck{}, err
	}
	// A retry of batches already written (info.Duplicate) comes back with
	// the original offsets; the caller's AwaitReplicated then waits for the
	// HW to pass the original's last offset at this leader epoch, so a
	// retry of a batch still in flight gets its outcome, and one whose
	// original is lost with a leadership change gets NOT_LEADER, never a
	// success for records that may not survive.
	info, err := part.Append(batches, acks)
	if err != nil {
		return pendingAck{}, err
	}
	c.cfg.Observer.ObserveProduce(received, info.Started)
	res.BaseOffset, res.LastOffset = info.FirstOffset, info.LastOffset
	if info.LogAppendTime > 0 {
		res.LogAppendTime = info.LogAppendTime
	}
	res.LogStartOffset = info.LogStartOffset
	return pendingAck{part: part, append: info, result: res}, nil
}

// awaitReplicated waits for one acks=all append to be committed, but not
// past the moment this broker's session with the controller runs out
// (broker.session.timeout.ms after the last answered heartbeat): a leader
// cut off from the controller has been, or is about to be, replaced, and
// its followers may never fetch again. Held until the produce timeout,
// the answer would keep the client on this broker long after the
// partition moved; answered now (NOT_LEADER_OR_FOLLOWER, no leader hint,
// outcome unknown) the client looks for the new leader.
func (c *Core) awaitReplicated(ctx context.Context, pa pendingAck) error {
	for {
		until, ok := c.cfg.Cluster.SessionDeadline()
		if !ok {
			return pa.part.AwaitReplicated(ctx, pa.append)
		}
		wctx, cancel := context.WithDeadline(ctx, until)
		err := pa.part.AwaitReplicated(wctx, pa.append)
		// Read before cancel, which would set it: did the session
		// deadline end the wait, or something else (committed, no longer
		// the leader)?
		deadlinePassed := wctx.Err() != nil
		cancel()
		if err == nil || ctx.Err() != nil || !deadlinePassed {
			return err
		}
		// The session deadline passed: lost, or renewed meanwhile.
		if c.cfg.Cluster.SessionLost() {
			return &replica.NotLeaderError{Topic: pa.part.Topic(), Partition: pa.part.ID(), Leader: -1, Epoch: -1}
		}
	}
}

// leaderPartition finds the replica this broker leads for topic-p. With
// autoCreate and a Creator, an unknown topic is created with the
// broker's defaults first.
func (c *Core) leaderPartition(ctx context.Context, topic string, p int32, autoCreate bool) (*replica.Partition, error) {
	if part, ok := c.cfg.Replicas.Partition(topic, p); ok {
		return part, nil
	}
	t, ok := c.cfg.Cluster.Topic(topic)
	if !ok {
		if !autoCreate || c.cfg.Creator == nil {
			return nil, unknownTopic(topic)
		}
		if err := ValidateTopicName(topic); err != nil {
			return nil, err
		}
		var err error
		if t, err = c.cfg.Creator.AutoCreateTopic(ctx, topic); err != nil {
			return nil, err
		}
		if part, ok := c.cfg.Replicas.Partition(topic, p); ok {
			return part, nil
		}
	}
	return nil, c.notHere(t, topic, p)
}

// leaderPartitionBy is leaderPartition of a produce, waiting for a topic
// it creates no later than deadline.
func (c *Core) leaderPartitionBy(ctx context.Context, deadline time.Time, topic string, p int32) (*replica.Partition, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return c.leaderPartition(ctx, topic, p, true)
}

// notHere is why this broker has no replica to lead for topic-p of t.
func (c *Core) notHere(t metadata.TopicInfo, topic string, p int32) error {
	if p < 0 || int(p) >= len(t.Partitions) {
		return invalidPartition(topic, p, len(t.Partitions))
	}
	pi := t.Partitions[p]
	if pi.Leader < 0 {
		return fmt.Errorf("%w: %s-%d has no leader", replica.ErrLeaderNotAvailable, topic, p)
	}
	if pi.Leader != c.cfg.NodeID {
		return &replica.NotLeaderError{Topic: topic, Partition: p, Leader: pi.Leader, Epoch: pi.LeaderEpoch}
	}
	// Led here by the image, but the replica is not open yet.
	return fmt.Errorf("%w: %s-%d is still being opened", replica.ErrLeaderNotAvailable, topic, p)
}

// routeTo is the broker to pass a partition on to, when route is set and
// err says that broker leads it.
func (c *Core) routeTo(route bool, err error) (int32, bool) {
	if !route || c.cfg.Forwarder == nil {
		return -1, false
	}
	var nle *replica.NotLeaderError
	if !errors.As(err, &nle) || nle.Leader < 0 || nle.Leader == c.cfg.NodeID {
		return -1, false
	}
	return nle.Leader, true
}

// forward is one partition of a produce to pass on to its leader.
type forward struct {
	leader  int32
	index   int   // in the request and its results
	notHere error // the NOT_LEADER answer, if the leader cannot be reached
}

// runForwards passes the queued partitions on to their leaders, one call
// per leader with all of its partitions in request order, the leaders at
// once, and fills in their answers: each is final (the leader has waited
// for acks). A leader that cannot be reached leaves the NOT_LEADER answer
// (nothing was sent); a call that fails once sent is REQUEST_TIMED_OUT:
// the records may or may not have been appended, as after any timeout.
func (c *Core) runForwards(ctx context.Context, deadline time.Time, req *ProduceRequest, fws []forward, results []ProduceResult) {
	if len(fws) == 0 {
		return
	}
	// fctx, not ctx reassigned: the goroutines take it, and a parameter
	// they take would be on the heap on every call, forwards or not.
	fctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var leaders []int32
	byLeader := map[int32][]forward{}
	for _, fw := range fws {
		if _, ok := byLeader[fw.leader]; !ok {
			leaders = append(leaders, fw.leader)
		}
		byLeader[fw.leader] = append(byLeader[fw.leader], fw)
	}
	dl, _ := fctx.Deadline() // deadline, or the caller's if sooner
	timeout := max(time.Until(dl)-forwardMargin, time.Millisecond)
	// Each leader's request is made here, not in its goroutine, so that
	// req is not kept past the call: a door's request may be on its
	// stack, or reused.
	acks := req.Acks
	fwds := make(map[int32]*ProduceRequest, len(leaders))
	for _, leader := range leaders {
		group := byLeader[leader]
		fwd := &ProduceRequest{Acks: acks, Timeout: timeout, Partitions: make([]ProducePartition, len(group)),
			TransactionalID: req.TransactionalID, VerifyPartitions: req.VerifyPartitions}
		for j, fw := range group {
			fwd.Partitions[j] = req.Partitions[fw.index]
		}
		fwds[leader] = fwd
	}
	var wg sync.WaitGroup
	for _, leader := range leaders {
		wg.Go(func() {
			group, fwd := byLeader[leader], fwds[leader]
			got, err := c.cfg.Forwarder.Produce(fctx, leader, fwd)
			if err == nil && len(got) != len(group) {
				err = fmt.Errorf("request: the leader %d answered %d partitions for %d", leader, len(got), len(group))
			}
			for j, fw := range group {
				res := &results[fw.index]
				switch {
				case errors.Is(err, ErrLeaderUnreachable):
					res.Err = c.fail(fw.notHere)
				case err != nil:
					res.Err = c.fail(fmt.Errorf("%w: %s-%d: passed on to the leader %d, no answer: %v",
						replica.ErrRequestTimedOut, res.Topic, res.Partition, leader, err))
				case acks == 0:
					// No offsets: nobody waited for them.
				default:
					g := got[j]
					res.BaseOffset, res.LastOffset, res.LogAppendTime, res.LogStartOffset = g.BaseOffset, g.LastOffset, g.LogAppendTime, g.LogStartOffset
					res.Err = c.fail(g.Err)
				}
			}
		})
	}
	wg.Wait()
}

// checkIdempotentAcks refuses batches of an idempotent producer (producer
// id >= 0) sent with acks other than -1: their duplicates are recognised
// only among batches every in-sync replica has, so a retry of an acks=1
// write lost with its leader could not be told from a new one.
func checkIdempotentAcks(topic string, p int32, batches []byte, acks int32) error {
	for len(batches) >= record.HeaderSize {
		h, err := record.ParseHeader(batches)
		if err != nil {
			return nil // the append reports the damage
		}
		if h.ProducerID >= 0 {
			return fmt.Errorf("%w: %s-%d: a batch of idempotent producer %d needs acks=-1 (all), not acks=%d",
				replica.ErrInvalidRequest, topic, p, h.ProducerID, acks)
		}
		n := h.Size()
		if n <= 0 || n > len(batches) {
			return nil
		}
		batches = batches[n:]
	}
	return nil
}
