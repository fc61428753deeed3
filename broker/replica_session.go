package broker

import (
	"fmt"

	pb "github.com/quirelog/quire/api/internalv1"
	"github.com/quirelog/quire/group"
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

// fetchedOffsets are the offsets of a partition's answer.
type fetchedOffsets struct{ hw, logStart, logEnd int64 }

func offsetsOf(r replica.FetchResult) fetchedOffsets {
	return fetchedOffsets{r.HighWatermark, r.LogStartOffset, r.LogEndOffset}
}

func keyOf(p replica.FetchPartition) group.TopicPartition {
	return group.TopicPartition{Topic: p.Topic, Partition: p.Partition}
}

// leaderSession is the leader's side of a stream's session: the
// partitions the follower fetches, in its order, as the replica manager
// takes them (converted once, when named), and what was last answered for
// each (answered[i] for parts[i]). It has none before the stream's first
// (whole) fetch. The replica manager keeps its own side of the session
// (rs), and notes in parts what it checked of each, so that a partition
// the follower does not name again is only refreshed.
type leaderSession struct {
	parts    []replica.FetchPartition
	answered []answeredOffsets
	index    map[group.TopicPartition]int // into parts
	rs       *replica.LeaderSession
}

// answeredOffsets are the offsets last answered for a partition, if any,
// and whether that answer was clean (no refusal, no divergence): only
// then does the follower apply it, so only then may the next answer that
// moves no offset be left out.
type answeredOffsets struct {
	fetchedOffsets
	ok, clean bool
}

func answeredOf(r replica.FetchResult) answeredOffsets {
	return answeredOffsets{offsetsOf(r), true, r.Err == nil && r.Diverging == nil}
}

func newLeaderSession() *leaderSession {
	return &leaderSession{index: map[group.TopicPartition]int{}, rs: replica.NewLeaderSession()}
}

// close ends the session (the stream ended).
func (s *leaderSession) close() { s.rs.Close() }

// request applies req to the session and returns the whole fetch it
// stands for: req's partitions when it is not incremental (they then
// replace the session's), else the session's partitions with req's
// changes.
func (s *leaderSession) request(req *pb.ReplicaFetchRequest) (*replica.FetchRequest, error) {
	if !req.GetIncremental() {
		if len(req.GetForgotten()) > 0 {
			return nil, fmt.Errorf("%w: a replica fetch that is not incremental forgets no partitions", ErrInvalidRequest)
		}
		clear(s.index)
		clear(s.parts)
		s.parts, s.answered = s.parts[:0], s.answered[:0]
	} else if len(s.parts) == 0 {
		return nil, fmt.Errorf("%w: an incremental replica fetch with no session on the stream", ErrInvalidRequest)
	}
	if len(req.GetForgotten()) > 0 {
		for _, f := range req.GetForgotten() {
			k := group.TopicPartition{Topic: f.GetTopic(), Partition: f.GetPartition()}
			if _, ok := s.index[k]; !ok {
				return nil, fmt.Errorf("%w: replica fetch forgets %s, which its session does not hold", ErrInvalidRequest, k)
			}
			delete(s.index, k)
		}
		kept := 0
		for i, p := range s.parts {
			if _, ok := s.index[keyOf(p)]; ok {
				s.index[keyOf(p)] = kept
				s.parts[kept], s.answered[kept] = p, s.answered[i]
				kept++
			}
		}
		clear(s.parts[kept:])
		s.parts, s.answered = s.parts[:kept], s.answered[:kept]
	}
	var seen map[group.TopicPartition]bool // most incremental fetches name one partition or none
	if len(req.GetPartitions()) > 1 {
		seen = make(map[group.TopicPartition]bool, len(req.GetPartitions()))
	}
	for _, f := range req.GetPartitions() {
		p := fetchPartitionFromPB(f)
		k := keyOf(p)
		if seen[k] {
			return nil, fmt.Errorf("%w: replica fetch names %s twice", ErrInvalidRequest, k)
		}
		if seen != nil {
			seen[k] = true
		}
		if i, ok := s.index[k]; ok {
			s.parts[i] = p
		} else {
			s.index[k] = len(s.parts)
			s.parts = append(s.parts, p)
			s.answered = append(s.answered, answeredOffsets{})
		}
	}
	return &replica.FetchRequest{ReplicaID: req.GetReplicaId(), Incarnation: req.GetIncarnation(), MaxWaitMs: req.GetMaxWaitMs(),
		MinBytes: req.GetMinBytes(), MaxBytes: req.GetMaxBytes(), Partitions: s.parts, Session: s.rs}, nil
}

// answer cuts resp, the whole fetch's answer (a result for each of the
// session's partitions, in its order), to what is sent on the stream: to
// an incremental request, only the partitions with something new since
// what was last answered for them. It records what it answers.
func (s *leaderSession) answer(incremental bool, resp *replica.FetchResponse) {
	kept := 0
	for i, r := range resp.Partitions {
		before := s.answered[i]
		s.answered[i] = answeredOf(r)
		if incremental && before.clean && s.answered[i] == before && len(r.Records) == 0 {
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
	ok    bool
	parts map[group.TopicPartition]*followerPart
	// order is the entry of each partition of the fetch in flight, in its
	// order, prev the last fetch's (a fetcher names its partitions in the
	// same order each time, so most are found there, not looked up), and
	// out the answer handed to the fetcher, reused from one fetch to the
	// next (the fetcher is done with an answer before it builds the next
	// fetch).
	order, prev []*followerPart
	out         []replica.FetchResult
}

// followerPart is one partition of a follower's session.
type followerPart struct {
	sent     replica.FetchPartition
	answered answeredOffsets
	named    bool // in the fetch in flight
}

// reset forgets the session (the stream ended).
func (s *followerSession) reset() {
	s.ok = false
	clear(s.parts)
	clear(s.order)
	clear(s.prev)
	s.order, s.prev = s.order[:0], s.prev[:0]
}

// entry is the session's entry for partition k, the i-th of the fetch
// being built, if it has one.
func (s *followerSession) entry(i int, k group.TopicPartition) (*followerPart, bool) {
	if i < len(s.prev) {
		if e := s.prev[i]; e.sent.Topic == k.Topic && e.sent.Partition == k.Partition {
			return e, true
		}
	}
	e, ok := s.parts[k]
	return e, ok
}

// message is req as sent on the stream: whole, or incremental once the
// leader keeps a session. It records what it names.
func (s *followerSession) message(req *replica.FetchRequest) *pb.ReplicaFetchRequest {
	if s.parts == nil {
		s.parts = map[group.TopicPartition]*followerPart{}
	}
	s.prev, s.order = s.order, s.prev
	clear(s.order)
	s.order = s.order[:0]
	if !s.ok {
		clear(s.parts)
		for _, p := range req.Partitions {
			e := &followerPart{sent: p}
			s.parts[keyOf(p)] = e
			s.order = append(s.order, e)
		}
		return fetchRequestToPB(req)
	}
	out := &pb.ReplicaFetchRequest{ReplicaId: req.ReplicaID, Incarnation: req.Incarnation, MaxWaitMs: req.MaxWaitMs,
		MinBytes: req.MinBytes, MaxBytes: req.MaxBytes, Incremental: true}
	for i, p := range req.Partitions {
		k := keyOf(p)
		e, ok := s.entry(i, k)
		switch {
		case !ok:
			e = &followerPart{sent: p}
			s.parts[k] = e
		case e.sent == p:
			e.named = true
			s.order = append(s.order, e)
			continue
		default:
			e.sent = p
		}
		e.named = true
		s.order = append(s.order, e)
		out.Partitions = append(out.Partitions, fetchPartitionToPB(p))
	}
	if len(s.parts) > len(req.Partitions) {
		// Some partition sent before is not named again (a fetch names
		// each once): it is forgotten.
		for k, e := range s.parts {
			if !e.named {
				delete(s.parts, k)
				out.Forgotten = append(out.Forgotten, &pb.ReplicaFetchForgotten{Topic: k.Topic, Partition: k.Partition})
			}
		}
	}
	for _, e := range s.order {
		e.named = false
	}
	return out
}

// response is the leader's answer msg to req, sent as sent (see message),
// as the whole answer: a result for every partition of req, in its order.
// It is the session's until its next fetch.
func (s *followerSession) response(req *replica.FetchRequest, sent *pb.ReplicaFetchRequest, msg *pb.ReplicaFetchResponse) (*replica.FetchResponse, error) {
	got := fetchResponseFromPB(msg)
	if !sent.GetIncremental() {
		if len(got.Partitions) != len(req.Partitions) {
			return nil, fmt.Errorf("replica: the leader answered %d partitions of %d", len(got.Partitions), len(req.Partitions))
		}
		for i, r := range got.Partitions {
			if r.Topic != req.Partitions[i].Topic || r.Partition != req.Partitions[i].Partition {
				return nil, fmt.Errorf("replica: the leader answered %s-%d for %s", r.Topic, r.Partition, keyOf(req.Partitions[i]))
			}
			s.order[i].answered = answeredOf(r)
		}
		s.ok = msg.GetSession()
		return got, nil
	}
	var byKey map[group.TopicPartition]int // nil when nothing is new, as most often
	if len(got.Partitions) > 0 {
		byKey = make(map[group.TopicPartition]int, len(got.Partitions))
	}
	for i, r := range got.Partitions {
		byKey[group.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = i
	}
	if cap(s.out) < len(req.Partitions) {
		s.out = make([]replica.FetchResult, len(req.Partitions))
	}
	out := &replica.FetchResponse{Partitions: s.out[:len(req.Partitions)]}
	for i, p := range req.Partitions {
		e := s.order[i]
		if byKey != nil {
			k := keyOf(p)
			if j, ok := byKey[k]; ok {
				r := got.Partitions[j]
				out.Partitions[i] = r
				e.answered = answeredOf(r)
				delete(byKey, k)
				continue
			}
		}
		o := e.answered
		if !o.ok {
			return nil, fmt.Errorf("replica: the leader's incremental answer leaves out %s, which it has not answered before", keyOf(p))
		}
		// Unchanged only after a clean answer, which the fetcher
		// applied: a leader that leaves out the first clean answer after
		// a refusal (this one does not) still has it applied.
		out.Partitions[i] = replica.FetchResult{Topic: p.Topic, Partition: p.Partition, HighWatermark: o.hw, LogStartOffset: o.logStart, LogEndOffset: o.logEnd,
			Unchanged: o.clean}
	}
	if len(byKey) > 0 {
		return nil, fmt.Errorf("replica: the leader answered %d partitions not fetched", len(byKey))
	}
	s.ok = msg.GetSession()
	return out, nil
}
