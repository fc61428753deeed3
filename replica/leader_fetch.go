package replica

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/quirelog/quire/storage"
)

// The leader's side of replication: what a follower's fetch does to the
// partition (its LEO, the HW, the ISR) and what it reads, and the long
// poll that answers it (HandleFetch). The follower's side is in
// fetcher.go and follower.go.

// followerFetch checks a follower's fetch of this partition against the
// leader's state and records the fetch offset as that follower's LEO. It
// returns the divergence the follower must truncate at, if its log has
// diverged from this one (KIP-320): the largest epoch <= its last fetched
// epoch that this log knows, and where that epoch ends here.
func (p *Partition) followerFetch(replica int32, f *FetchPartition, now time.Time) (*EpochEndOffset, error) {
	st := p.state()
	if !st.leader {
		return nil, &NotLeaderError{Topic: p.topic, Partition: p.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
	}
	epoch := f.CurrentLeaderEpoch
	if err := p.CheckLeaderEpoch(&epoch); err != nil {
		return nil, err
	}
	if !contains(st.replicas, replica) || replica == st.leaderID {
		return nil, fmt.Errorf("%w: broker %d is not a follower of %s-%d (replicas %v)", ErrInvalidRequest, replica, p.topic, p.id, st.replicas)
	}
	if f.LogFailed {
		p.followerLogFailed(replica, st.leaderEpoch)
		return nil, nil
	}
	offset := f.FetchOffset
	if last := f.LastFetchedEpoch; last >= 0 {
		e, end := p.log.EndOffsetForEpoch(last)
		if e < last || end < offset {
			return &EpochEndOffset{Epoch: e, EndOffset: end}, nil
		}
	}
	start, leo := p.log.LogStartOffset(), p.log.LogEndOffset()
	if offset < start || offset > leo {
		return nil, fmt.Errorf("%w: %s-%d: follower %d fetches at %d, log is [%d, %d]",
			storage.ErrOffsetOutOfRange, p.topic, p.id, replica, offset, start, leo)
	}
	p.recordFollowerFetch(replica, offset, f.LogStartOffset, now, st.leaderEpoch)
	return nil, nil
}

// readForFollower reads from offset up to maxBytes into buf's spare
// capacity (see storage.Log.ReadAppend), past the HW: a follower copies
// everything the leader has.
func (p *Partition) readForFollower(buf []byte, offset int64, maxBytes int) (storage.ReadResult, error) {
	res, err := p.log.ReadAppend(buf, offset, maxBytes, math.MaxInt64)
	if err != nil {
		return res, fmt.Errorf("%s-%d: %w", p.topic, p.id, err)
	}
	p.delivered(StageFollowerRead, res)
	return res, nil
}

// maxReplicaFetchWait caps a follower's long poll.
const maxReplicaFetchWait = 30 * time.Second

// defaultPartitionMaxBytes is max.partition.fetch.bytes, a partition's
// read cap when the request names none.
const defaultPartitionMaxBytes = 1048576

// ReadLimit is how many bytes one partition of a fetch may read: its own
// cap (partitionMax, default max.partition.fetch.bytes), within what the
// response (responseMax) has left after total, and at least one batch as
// long as nothing has been returned yet, as Kafka does. 0 or less: none.
func ReadLimit(partitionMax, responseMax, total int) int {
	limit := partitionMax
	if limit <= 0 {
		limit = defaultPartitionMaxBytes
	}
	if left := responseMax - total; left < limit {
		limit = left
		if total == 0 {
			limit = max(limit, 1)
		}
	}
	return limit
}

// idleRefresh is how often at most a fetch session records a follower
// at an idle partition's log end in the partition's state: a fetch that
// finds the follower at the log end, as it was when last recorded (a
// leader's log end only moves on within its epoch), skips it, sparing
// a lock and the ISR bookkeeping on each of a session's thousands of
// idle partitions at every fetch, which every append to any of them
// wakes. The follower's
// caught-up time is at most this much older for it, against
// replica.lag.time.max.ms (over replica.fetch.wait.max.ms, which a
// fetch of idle partitions waits out). The skip holds only while the
// partition is led here at the epoch fetched (Partition.ledEpoch: a
// replica removed, or hosted again as a new Partition, no longer is);
// any change of the fetch makes it a new FetchPartition, checked in
// full; a follower dropped from the replicas is told at the next
// refresh.
const idleRefresh = 100 * time.Millisecond

// HandleFetch answers a follower's pull. Each partition first records the
// fetch offset as the follower's LEO (which may move the HW and add the
// follower back to the ISR); then the batches from there are read, past
// the HW, and the call long-polls for new appends while fewer than
// MinBytes came back, until MaxWaitMs, ctx ends or the manager stops.
// Errors of one partition are in its result; the whole call fails only
// for a request that is invalid or not from the follower's registered
// process.
func (rm *Manager) HandleFetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error) {
	if req.Incremental || len(req.Forgotten) > 0 {
		return nil, fmt.Errorf("%w: an incremental replica fetch needs the fetch session of a stream", ErrInvalidRequest)
	}
	if len(req.Partitions) == 0 {
		return nil, fmt.Errorf("%w: replica fetch names no partitions", ErrInvalidRequest)
	}
	if id := req.ReplicaID; id < 0 || id == rm.nodeID {
		return nil, fmt.Errorf("%w: replica fetch from broker %d", ErrInvalidRequest, id)
	}
	if r, ok := rm.brokers.Registration(req.ReplicaID); !ok || r.Incarnation != req.Incarnation {
		return nil, fmt.Errorf("%w: replica fetch from broker %d is not from its registered incarnation",
			ErrStaleBrokerEpoch, req.ReplicaID)
	}
	if req.MaxBytes < 0 || req.MinBytes < 0 || req.MaxWaitMs < 0 {
		return nil, fmt.Errorf("%w: negative max_bytes, min_bytes or max_wait_ms", ErrInvalidRequest)
	}
	now := time.Now()
	resp := &FetchResponse{}
	var parts []*Partition
	if s := req.Session; s != nil {
		resp.Partitions, parts = s.buffers(len(req.Partitions))
	} else {
		resp.Partitions, parts = make([]FetchResult, len(req.Partitions)), make([]*Partition, len(req.Partitions))
	}
	stop := false // an error or a divergence answers at once
	for i := range req.Partitions {
		f := &req.Partitions[i]
		r := &resp.Partitions[i]
		*r = FetchResult{Topic: f.Topic, Partition: f.Partition, HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}
		// In a session, most partitions of most fetches are the same as
		// in the one before (idle, the follower at their log end): what
		// was checked then holds, and the fetch only refreshes the
		// follower's state, at most every idleRefresh while the log end
		// stays where the follower is.
		if part := f.checked; part != nil {
			if f.FetchOffset == part.log.LogEndOffset() && now.Sub(f.refreshed) < idleRefresh &&
				part.ledEpoch.Load() == f.CurrentLeaderEpoch {
				parts[i] = part
				continue
			}
			if part.refreshFollowerFetch(req.ReplicaID, f.FetchOffset, f.LogStartOffset, now, f.CurrentLeaderEpoch) {
				f.refreshed = now
				parts[i] = part
				continue
			}
		}
		f.checked = nil
		part, ok := rm.Partition(f.Topic, f.Partition)
		if !ok {
			r.Err = unknownPartition(f.Topic, f.Partition)
			stop = true
			continue
		}
		div, err := part.followerFetch(req.ReplicaID, f, now)
		if err == nil && div == nil && !f.LogFailed {
			parts[i] = part // its offsets come with the read
			if req.Session != nil {
				f.checked = part
			}
			continue
		}
		// Nothing to read: into a failed log (and no reason to answer at
		// once), or for a refusal or a divergence (answered at once).
		setLogOffsets(r, part, part.HighWatermark())
		r.Err, r.Diverging = err, div
		stop = stop || err != nil || div != nil
	}
	var wake chan struct{}
	if s := req.Session; s != nil {
		wake = s.watch(parts)
	} else {
		wake = make(chan struct{}, 1)
		for _, part := range parts {
			if part != nil {
				part.watchLEO(wake)
				defer part.unwatchLEO(wake)
			}
		}
	}
	wait := time.NewTimer(min(time.Duration(req.MaxWaitMs)*time.Millisecond, maxReplicaFetchWait))
	defer wait.Stop()
	for {
		n := rm.readForFollower(req, parts, resp)
		if stop || n >= int(req.MinBytes) || req.MaxWaitMs == 0 || startsAhead(req, parts) {
			rm.replicationBytesOut.Add(uint64(n))
			return resp, nil
		}
		select {
		case <-wake:
		case <-wait.C:
			stop = true
		case <-ctx.Done():
			rm.ReleaseFetch(resp)
			return nil, ctx.Err()
		case <-rm.ctx.Done():
			stop = true
		}
	}
}

// startsAhead reports whether this log's start is past the one a follower
// said it has (a DeleteRecords moved it) while its fetch offset is at or
// past it: the answer, which carries the start, goes at once rather than
// at the end of the long poll, since a DeleteRecords waits for every
// in-sync follower to have it. A follower that did not say (-1) learns it
// at the end of the long poll.
func startsAhead(req *FetchRequest, parts []*Partition) bool {
	for i, part := range parts {
		if part == nil {
			continue
		}
		f := &req.Partitions[i]
		if start := part.log.LogStartOffset(); f.LogStartOffset >= 0 && f.LogStartOffset < start && f.FetchOffset >= start {
			return true
		}
	}
	return false
}

// LeaderSession is what a leader keeps of one follower's fetch stream from
// one fetch to the next (the broker's ReplicaFetchStream session), beside
// the session's partitions (FetchRequest.Session): the stream's wake
// channel stays registered with every partition it fetches, instead of
// being registered and dropped on each at every fetch. One fetch at a
// time, and its answer is the session's until the next one; Close it when
// the stream ends.
type LeaderSession struct {
	wake    chan struct{}
	fetches uint64
	watched map[*Partition]uint64 // the fetch that last named each
	lastSet []*Partition          // the partitions watch was last given
	results []FetchResult         // the answer's, reused
	parts   []*Partition

	// The session's partitions as the follower named them (session.go):
	// the whole fetch, in its order, what was last answered for each
	// (answered[i] for fetch[i]), and where each is in fetch. bufs takes
	// back the read buffers of results left out of an answer.
	fetch    []FetchPartition
	answered []answeredOffsets
	index    map[storage.TopicPartition]int
	bufs     Buffers
}

// buffers returns the answer and the partitions to read of a fetch of n
// partitions, in place of the previous fetch's.
func (s *LeaderSession) buffers(n int) ([]FetchResult, []*Partition) {
	if cap(s.results) < n {
		s.results, s.parts = make([]FetchResult, n), make([]*Partition, n)
	}
	s.results, s.parts = s.results[:n], s.parts[:n]
	clear(s.parts)
	return s.results, s.parts
}

// NewLeaderSession starts a leader's side of a fetch session.
func NewLeaderSession() *LeaderSession {
	return &LeaderSession{wake: make(chan struct{}, 1), watched: map[*Partition]uint64{},
		index: map[storage.TopicPartition]int{}, bufs: freshBuffers{}}
}

// watch registers the session's channel with parts (nil entries are
// none), drops it from partitions the session no longer fetches, and
// returns it emptied: the read that follows sees every append before.
func (s *LeaderSession) watch(parts []*Partition) chan struct{} {
	if !slices.Equal(parts, s.lastSet) {
		s.rewatch(parts)
		s.lastSet = append(s.lastSet[:0], parts...)
	}
	select {
	case <-s.wake:
	default:
	}
	return s.wake
}

// rewatch registers the channel with parts and drops it from the others;
// watch calls it only when they differ from the last fetch's, as they
// rarely do.
func (s *LeaderSession) rewatch(parts []*Partition) {
	s.fetches++
	named := 0
	for _, part := range parts {
		if part == nil {
			continue
		}
		if _, ok := s.watched[part]; !ok {
			part.watchLEO(s.wake)
		}
		s.watched[part] = s.fetches
		named++
	}
	if named < len(s.watched) {
		for part, at := range s.watched {
			if at != s.fetches {
				part.unwatchLEO(s.wake)
				delete(s.watched, part)
			}
		}
	}
}

// Close drops the session's channel from every partition.
func (s *LeaderSession) Close() {
	for part := range s.watched {
		part.unwatchLEO(s.wake)
	}
	clear(s.watched)
	s.lastSet = s.lastSet[:0]
}

// readForFollower fills in the records of every partition being read and
// returns the bytes read; a partition no longer led here gets its error.
func (rm *Manager) readForFollower(req *FetchRequest, parts []*Partition, resp *FetchResponse) int {
	maxBytes := int(req.MaxBytes)
	if maxBytes == 0 {
		maxBytes = rm.maxResponseBytes
	}
	maxBytes = min(maxBytes, rm.maxResponseBytes)
	total := 0
	for i, part := range parts {
		if part == nil {
			continue
		}
		f, r := &req.Partitions[i], &resp.Partitions[i]
		rm.release(r)
		limit := ReadLimit(int(f.PartitionMaxBytes), maxBytes, total)
		st := part.state()
		if !st.leader || st.leaderEpoch != f.CurrentLeaderEpoch {
			r.Err = &NotLeaderError{Topic: part.topic, Partition: part.id, Leader: st.leaderID, Epoch: st.leaderEpoch}
			setLogOffsets(r, part, st.hw)
			parts[i] = nil
			f.checked = nil
			continue
		}
		// A follower at the log end has nothing to read (an idle
		// partition, most of a follower's as a rule): no buffer, no read.
		if limit > 0 && f.FetchOffset < part.log.LogEndOffset() {
			buf := rm.readBufs.Get(limit)
			res, err := part.readForFollower((*buf)[:0], f.FetchOffset, limit)
			if err != nil {
				rm.readBufs.Put(buf)
				r.Err = err
				setLogOffsets(r, part, st.hw)
				parts[i] = nil
				f.checked = nil
				continue
			}
			r.Records = res.Batches
			total += len(res.Batches)
			if len(res.Batches) > 0 && cap(res.Batches) == cap(*buf) && &res.Batches[:1][0] == &(*buf)[:1][0] {
				*buf = res.Batches
				r.Buffer = buf
			} else {
				// Nothing read, or a batch larger than the buffer read
				// into one of its own.
				rm.readBufs.Put(buf)
			}
		}
		setLogOffsets(r, part, st.hw)
	}
	return total
}

// release gives back the read buffer of r, if any, and drops its records.
func (rm *Manager) release(r *FetchResult) {
	if r.Buffer != nil {
		rm.readBufs.Put(r.Buffer)
	}
	r.Records, r.Buffer = nil, nil
}

// ReleaseFetch gives back the read buffers of a leader's answer that is
// not sent (or whose records were copied): its records are then invalid.
func (rm *Manager) ReleaseFetch(resp *FetchResponse) {
	for i := range resp.Partitions {
		rm.release(&resp.Partitions[i])
	}
}

func setLogOffsets(r *FetchResult, part *Partition, hw int64) {
	r.HighWatermark, r.LogStartOffset, r.LogEndOffset = hw, part.log.LogStartOffset(), part.log.LogEndOffset()
}
