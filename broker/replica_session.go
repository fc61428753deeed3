package broker

import (
	"fmt"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/internal/bufpool"
	"github.com/quirelog/quire/replica"
)

// The fetch session of a ReplicaFetchStream, both ends (see
// ReplicaFetchStream in replica.proto). A follower names every partition it
// fetches from a leader in every fetch, and every append on any of them
// ends the fetch in flight: with many partitions, most of them idle, each
// fetch carried and answered all of them, and encoding, decoding and
// sending those was most of what replication cost either broker. In a
// session each end remembers what it last sent on the stream, and sends
// only what differs. The leader still takes every partition of the
// session as fetched (a follower's LEO, and whether it is caught up for
// the ISR, are refreshed by every fetch as before): the session changes the
// wire, not what a fetch means.

// partitionKey names a partition within a session.
type partitionKey struct {
	topic     string
	partition int32
}

// fetchedOffsets are the offsets of a partition's answer.
type fetchedOffsets struct{ hw, logStart, logEnd int64 }

// leaderSession is the leader's side of a stream's session: the
// partitions the follower fetches, in its order, and what was last
// answered for each.
type leaderSession struct {
	started  bool // a whole request began the session
	parts    []*pb.ReplicaFetchPartition
	index    map[partitionKey]int // into parts
	answered map[partitionKey]fetchedOffsets
}

func newLeaderSession() *leaderSession {
	return &leaderSession{index: map[partitionKey]int{}, answered: map[partitionKey]fetchedOffsets{}}
}

// request applies req to the session and returns the whole fetch it
// stands for: req itself when it is not incremental (it then replaces the
// session), else the session's partitions with req's changes.
func (s *leaderSession) request(req *pb.ReplicaFetchRequest) (*pb.ReplicaFetchRequest, error) {
	if !req.GetIncremental() {
		if len(req.GetForgotten()) > 0 {
			return nil, fmt.Errorf("%w: a replica fetch that is not incremental forgets no partitions", ErrInvalidRequest)
		}
		clear(s.index)
		clear(s.answered)
		clear(s.parts)
		s.parts = s.parts[:0]
		if err := s.add(req.GetPartitions()); err != nil {
			return nil, err
		}
		s.started = true
		return req, nil
	}
	if !s.started {
		return nil, fmt.Errorf("%w: an incremental replica fetch with no session on the stream", ErrInvalidRequest)
	}
	gone := false
	for _, f := range req.GetForgotten() {
		k := partitionKey{f.GetTopic(), f.GetPartition()}
		i, ok := s.index[k]
		if !ok {
			return nil, fmt.Errorf("%w: replica fetch forgets %s-%d, which its session does not hold", ErrInvalidRequest, k.topic, k.partition)
		}
		s.parts[i] = nil
		delete(s.index, k)
		delete(s.answered, k)
		gone = true
	}
	if gone {
		kept := s.parts[:0]
		for _, p := range s.parts {
			if p != nil {
				s.index[partitionKey{p.GetTopic(), p.GetPartition()}] = len(kept)
				kept = append(kept, p)
			}
		}
		clear(s.parts[len(kept):])
		s.parts = kept
	}
	var added []*pb.ReplicaFetchPartition
	var seen map[partitionKey]bool // most incremental fetches name one partition or none
	if len(req.GetPartitions()) > 1 {
		seen = make(map[partitionKey]bool, len(req.GetPartitions()))
	}
	for _, p := range req.GetPartitions() {
		k := partitionKey{p.GetTopic(), p.GetPartition()}
		if seen[k] {
			return nil, fmt.Errorf("%w: replica fetch names %s-%d twice", ErrInvalidRequest, k.topic, k.partition)
		}
		if seen != nil {
			seen[k] = true
		}
		if i, ok := s.index[k]; ok {
			s.parts[i] = p
		} else {
			added = append(added, p)
		}
	}
	if err := s.add(added); err != nil {
		return nil, err
	}
	return &pb.ReplicaFetchRequest{ReplicaId: req.GetReplicaId(), Incarnation: req.GetIncarnation(), MaxWaitMs: req.GetMaxWaitMs(),
		MinBytes: req.GetMinBytes(), MaxBytes: req.GetMaxBytes(), Partitions: s.parts}, nil
}

// add appends partitions new to the session.
func (s *leaderSession) add(parts []*pb.ReplicaFetchPartition) error {
	for _, p := range parts {
		k := partitionKey{p.GetTopic(), p.GetPartition()}
		if _, ok := s.index[k]; ok {
			return fmt.Errorf("%w: replica fetch names %s-%d twice", ErrInvalidRequest, k.topic, k.partition)
		}
		s.index[k] = len(s.parts)
		s.parts = append(s.parts, p)
	}
	return nil
}

// answer cuts resp, the whole fetch's answer, to what is sent on the
// stream: to an incremental request, only the partitions with something
// new since what was last answered for them. It records what it answers.
func (s *leaderSession) answer(incremental bool, resp *replica.FetchResponse) {
	kept := 0
	for _, r := range resp.Partitions {
		k := partitionKey{r.Topic, r.Partition}
		now := fetchedOffsets{r.HighWatermark, r.LogStartOffset, r.LogEndOffset}
		before, known := s.answered[k]
		s.answered[k] = now
		if incremental && known && before == now && len(r.Records) == 0 && r.Err == nil && r.Diverging == nil {
			if r.Buffer != nil {
				bufpool.Shared.Put(r.Buffer)
			}
			continue
		}
		resp.Partitions[kept] = r
		kept++
	}
	clear(resp.Partitions[kept:])
	resp.Partitions = resp.Partitions[:kept]
}

// followerSession is the follower's side of a stream's session: what it
// last named of each partition, and the offsets last answered for it.
// ok says the leader keeps a session (its last answer said so).
type followerSession struct {
	ok       bool
	sent     map[partitionKey]replica.FetchPartition
	answered map[partitionKey]fetchedOffsets
}

// reset forgets the session (the stream ended).
func (s *followerSession) reset() {
	s.ok = false
	clear(s.sent)
	clear(s.answered)
}

// message is req as sent on the stream: whole, or incremental once the
// leader keeps a session. It records what it names.
func (s *followerSession) message(req *replica.FetchRequest) *pb.ReplicaFetchRequest {
	if s.sent == nil {
		s.sent = map[partitionKey]replica.FetchPartition{}
		s.answered = map[partitionKey]fetchedOffsets{}
	}
	if !s.ok {
		clear(s.sent)
		clear(s.answered)
		for _, p := range req.Partitions {
			s.sent[partitionKey{p.Topic, p.Partition}] = p
		}
		return fetchRequestToPB(req)
	}
	out := &pb.ReplicaFetchRequest{ReplicaId: req.ReplicaID, Incarnation: req.Incarnation, MaxWaitMs: req.MaxWaitMs,
		MinBytes: req.MinBytes, MaxBytes: req.MaxBytes, Incremental: true}
	for _, p := range req.Partitions {
		k := partitionKey{p.Topic, p.Partition}
		if before, ok := s.sent[k]; ok && before == p {
			continue
		}
		s.sent[k] = p
		out.Partitions = append(out.Partitions, fetchPartitionToPB(p))
	}
	if len(s.sent) == len(req.Partitions) {
		// Every partition sent before is named again (a fetch names
		// each once): none is forgotten.
		return out
	}
	named := make(map[partitionKey]bool, len(req.Partitions))
	for _, p := range req.Partitions {
		named[partitionKey{p.Topic, p.Partition}] = true
	}
	for k := range s.sent {
		if !named[k] {
			delete(s.sent, k)
			delete(s.answered, k)
			out.Forgotten = append(out.Forgotten, &pb.ReplicaFetchForgotten{Topic: k.topic, Partition: k.partition})
		}
	}
	return out
}

// response is the leader's answer msg to req, sent as sent (see message),
// as the whole answer: a result for every partition of req, in its order.
func (s *followerSession) response(req *replica.FetchRequest, sent *pb.ReplicaFetchRequest, msg *pb.ReplicaFetchResponse) (*replica.FetchResponse, error) {
	got := fetchResponseFromPB(msg)
	if !sent.GetIncremental() {
		if len(got.Partitions) != len(req.Partitions) {
			return nil, fmt.Errorf("replica: the leader answered %d partitions of %d", len(got.Partitions), len(req.Partitions))
		}
		for _, r := range got.Partitions {
			s.answered[partitionKey{r.Topic, r.Partition}] = fetchedOffsets{r.HighWatermark, r.LogStartOffset, r.LogEndOffset}
		}
		s.ok = msg.GetSession()
		return got, nil
	}
	var byKey map[partitionKey]int // nil when nothing is new, as most often
	if len(got.Partitions) > 0 {
		byKey = make(map[partitionKey]int, len(got.Partitions))
	}
	for i, r := range got.Partitions {
		byKey[partitionKey{r.Topic, r.Partition}] = i
	}
	out := &replica.FetchResponse{Partitions: make([]replica.FetchResult, len(req.Partitions))}
	for i, p := range req.Partitions {
		k := partitionKey{p.Topic, p.Partition}
		if j, ok := byKey[k]; ok {
			r := got.Partitions[j]
			out.Partitions[i] = r
			s.answered[k] = fetchedOffsets{r.HighWatermark, r.LogStartOffset, r.LogEndOffset}
			delete(byKey, k)
			continue
		}
		o, ok := s.answered[k]
		if !ok {
			return nil, fmt.Errorf("replica: the leader's incremental answer leaves out %s-%d, which it has not answered before", k.topic, k.partition)
		}
		out.Partitions[i] = replica.FetchResult{Topic: k.topic, Partition: k.partition, HighWatermark: o.hw, LogStartOffset: o.logStart, LogEndOffset: o.logEnd}
	}
	if len(byKey) > 0 {
		return nil, fmt.Errorf("replica: the leader answered %d partitions not fetched", len(byKey))
	}
	s.ok = msg.GetSession()
	return out, nil
}
