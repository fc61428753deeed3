package replica

import (
	"context"
	"fmt"

	"github.com/quirelog/quire/storage"
)

// The fetch session of one follower's fetcher with one leader, both ends,
// in plain types: a transport that keeps one stream per fetcher (the
// broker's ReplicaFetchStream) carries its messages. A follower names
// every partition it fetches from a leader in every fetch, and every
// append on any of them ends the fetch in flight: with many partitions,
// most of them idle, each fetch carried and answered all of them, and
// encoding, decoding and sending those was most of what replication cost
// either broker. In a session each end remembers what it last sent, and
// sends only what differs. The leader still takes every partition of the
// session as fetched (a follower's LEO, and whether it is caught up for
// the ISR, are refreshed by every fetch as before): the session changes
// the wire, not what a fetch means.

// answeredOffsets are the offsets last answered for a partition, if any
// (ok), and whether that answer was clean (no refusal, no divergence):
// only then does the follower apply it, so only then may the next answer
// that moves no offset be left out.
type answeredOffsets struct {
	hw, logStart, logEnd int64
	ok, clean            bool
}

func answeredOf(r *FetchResult) answeredOffsets {
	return answeredOffsets{r.HighWatermark, r.LogStartOffset, r.LogEndOffset, true, r.Err == nil && r.Diverging == nil}
}

func keyOf(p *FetchPartition) storage.TopicPartition {
	return storage.TopicPartition{Topic: p.Topic, Partition: p.Partition}
}

// HandleSessionFetch answers a follower's fetch in session s, one of a
// stream's fetches in turn: req is whole (its first, or after the
// follower lost the session) or incremental (Session.Request), and the
// answer is cut to what the follower needs (Session.Answer). Errors are
// HandleFetch's, and a request the session cannot apply is
// ErrInvalidRequest.
func (rm *Manager) HandleSessionFetch(ctx context.Context, s *LeaderSession, req *FetchRequest) (*FetchResponse, error) {
	whole, err := s.Request(req)
	if err != nil {
		return nil, err
	}
	resp, err := rm.HandleFetch(ctx, whole)
	if err != nil {
		return nil, err
	}
	s.bufs = rm.readBufs
	s.Answer(req.Incremental, resp)
	return resp, nil
}

// Request applies req to the session and returns the whole fetch it
// stands for: req's partitions when it is not incremental (they then
// replace the session's), else the session's partitions with req's
// changes. The whole fetch is the session's (FetchRequest.Session), valid
// until its next fetch.
func (s *LeaderSession) Request(req *FetchRequest) (*FetchRequest, error) {
	if !req.Incremental {
		if len(req.Forgotten) > 0 {
			return nil, fmt.Errorf("%w: a replica fetch that is not incremental forgets no partitions", ErrInvalidRequest)
		}
		clear(s.index)
		clear(s.fetch)
		s.fetch, s.answered = s.fetch[:0], s.answered[:0]
	} else if len(s.fetch) == 0 {
		return nil, fmt.Errorf("%w: an incremental replica fetch with no session on the stream", ErrInvalidRequest)
	}
	if len(req.Forgotten) > 0 {
		for _, k := range req.Forgotten {
			if _, ok := s.index[k]; !ok {
				return nil, fmt.Errorf("%w: replica fetch forgets %s, which its session does not hold", ErrInvalidRequest, k)
			}
			delete(s.index, k)
		}
		kept := 0
		for i := range s.fetch {
			k := keyOf(&s.fetch[i])
			if _, ok := s.index[k]; ok {
				s.index[k] = kept
				s.fetch[kept], s.answered[kept] = s.fetch[i], s.answered[i]
				kept++
			}
		}
		clear(s.fetch[kept:])
		s.fetch, s.answered = s.fetch[:kept], s.answered[:kept]
	}
	var seen map[storage.TopicPartition]bool // most incremental fetches name one partition or none
	if len(req.Partitions) > 1 {
		seen = make(map[storage.TopicPartition]bool, len(req.Partitions))
	}
	for i := range req.Partitions {
		p := &req.Partitions[i]
		k := keyOf(p)
		if seen[k] {
			return nil, fmt.Errorf("%w: replica fetch names %s twice", ErrInvalidRequest, k)
		}
		if seen != nil {
			seen[k] = true
		}
		named := *p
		named.checked = nil // a changed fetch is checked again in full
		if j, ok := s.index[k]; ok {
			s.fetch[j] = named
		} else {
			s.index[k] = len(s.fetch)
			s.fetch = append(s.fetch, named)
			s.answered = append(s.answered, answeredOffsets{})
		}
	}
	return &FetchRequest{ReplicaID: req.ReplicaID, Incarnation: req.Incarnation, MaxWaitMs: req.MaxWaitMs,
		MinBytes: req.MinBytes, MaxBytes: req.MaxBytes, Partitions: s.fetch, Session: s}, nil
}

// Answer cuts resp, the whole fetch's answer (a result for each of the
// session's partitions, in its order), to what the follower is sent: to
// an incremental request, only the partitions with something new since
// what was last answered for them. It records what it answers, and
// marks the answer as the session's.
func (s *LeaderSession) Answer(incremental bool, resp *FetchResponse) {
	kept := 0
	for i := range resp.Partitions {
		r := &resp.Partitions[i]
		before := s.answered[i]
		s.answered[i] = answeredOf(r)
		if incremental && before.clean && s.answered[i] == before && len(r.Records) == 0 {
			if r.Buffer != nil {
				s.bufs.Put(r.Buffer)
			}
			continue
		}
		resp.Partitions[kept] = *r
		kept++
	}
	clear(resp.Partitions[kept:])
	resp.Partitions = resp.Partitions[:kept]
	resp.Session = true
}

// FollowerSession is the follower's side of a fetch session: what it last
// named of each partition, and the offsets last answered for it. The
// zero value is ready; one fetch at a time.
type FollowerSession struct {
	ok    bool // the leader keeps a session (its last answer said so)
	parts map[storage.TopicPartition]*followerPart
	// order is the entry of each partition of the fetch in flight, in its
	// order, prev the last fetch's (a fetcher names its partitions in the
	// same order each time, so most are found there, not looked up), and
	// out the answer handed to the fetcher, reused from one fetch to the
	// next (the fetcher is done with an answer before it builds the next
	// fetch). msg is the incremental request last sent, reused likewise.
	order, prev []*followerPart
	out         []FetchResult
	msg         FetchRequest
}

// followerPart is one partition of a follower's session.
type followerPart struct {
	sent     FetchPartition
	answered answeredOffsets
	named    bool // in the fetch in flight
}

// Reset forgets the session (its stream ended): the next fetch is whole.
func (s *FollowerSession) Reset() {
	s.ok = false
	clear(s.parts)
	clear(s.order)
	clear(s.prev)
	s.order, s.prev = s.order[:0], s.prev[:0]
}

// entry is the session's entry for partition k, the i-th of the fetch
// being built, if it has one.
func (s *FollowerSession) entry(i int, k storage.TopicPartition) (*followerPart, bool) {
	if i < len(s.prev) {
		if e := s.prev[i]; e.sent.Topic == k.Topic && e.sent.Partition == k.Partition {
			return e, true
		}
	}
	e, ok := s.parts[k]
	return e, ok
}

// Message is req as sent to the leader: req itself, or an incremental
// request once the leader keeps a session (valid until the next
// Message). It records what it names.
func (s *FollowerSession) Message(req *FetchRequest) *FetchRequest {
	if s.parts == nil {
		s.parts = map[storage.TopicPartition]*followerPart{}
	}
	s.prev, s.order = s.order, s.prev
	clear(s.order)
	s.order = s.order[:0]
	if !s.ok {
		clear(s.parts)
		for i := range req.Partitions {
			e := &followerPart{sent: req.Partitions[i]}
			s.parts[keyOf(&req.Partitions[i])] = e
			s.order = append(s.order, e)
		}
		return req
	}
	out := &s.msg
	clear(out.Partitions)
	clear(out.Forgotten)
	*out = FetchRequest{ReplicaID: req.ReplicaID, Incarnation: req.Incarnation, MaxWaitMs: req.MaxWaitMs,
		MinBytes: req.MinBytes, MaxBytes: req.MaxBytes, Incremental: true,
		Partitions: out.Partitions[:0], Forgotten: out.Forgotten[:0]}
	for i := range req.Partitions {
		p := &req.Partitions[i]
		k := keyOf(p)
		e, ok := s.entry(i, k)
		switch {
		case !ok:
			e = &followerPart{sent: *p}
			s.parts[k] = e
		case e.sent == *p:
			e.named = true
			s.order = append(s.order, e)
			continue
		default:
			e.sent = *p
		}
		e.named = true
		s.order = append(s.order, e)
		out.Partitions = append(out.Partitions, *p)
	}
	if len(s.parts) > len(req.Partitions) {
		// Some partition sent before is not named again (a fetch names
		// each once): it is forgotten.
		for k, e := range s.parts {
			if !e.named {
				delete(s.parts, k)
				out.Forgotten = append(out.Forgotten, k)
			}
		}
	}
	for _, e := range s.order {
		e.named = false
	}
	return out
}

// Response is the leader's answer got to req, sent as sent (see Message),
// as the whole answer: a result for every partition of req, in its order.
// It is the session's until its next fetch.
func (s *FollowerSession) Response(req, sent *FetchRequest, got *FetchResponse) (*FetchResponse, error) {
	if !sent.Incremental {
		if err := answersAll(req, got); err != nil {
			return nil, err
		}
		for i := range got.Partitions {
			s.order[i].answered = answeredOf(&got.Partitions[i])
		}
		s.ok = got.Session
		return got, nil
	}
	var byKey map[storage.TopicPartition]int // nil when nothing is new, as most often
	if len(got.Partitions) > 0 {
		byKey = make(map[storage.TopicPartition]int, len(got.Partitions))
	}
	for i := range got.Partitions {
		byKey[storage.TopicPartition{Topic: got.Partitions[i].Topic, Partition: got.Partitions[i].Partition}] = i
	}
	if cap(s.out) < len(req.Partitions) {
		s.out = make([]FetchResult, len(req.Partitions))
	}
	out := &FetchResponse{Partitions: s.out[:len(req.Partitions)], Done: got.Done, Session: got.Session}
	for i := range req.Partitions {
		p := &req.Partitions[i]
		e := s.order[i]
		if byKey != nil {
			k := keyOf(p)
			if j, ok := byKey[k]; ok {
				r := &got.Partitions[j]
				out.Partitions[i] = *r
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
		out.Partitions[i] = FetchResult{Topic: p.Topic, Partition: p.Partition, HighWatermark: o.hw, LogStartOffset: o.logStart,
			LogEndOffset: o.logEnd, Unchanged: o.clean}
	}
	if len(byKey) > 0 {
		return nil, fmt.Errorf("replica: the leader answered %d partitions not fetched", len(byKey))
	}
	s.ok = got.Session
	return out, nil
}

// answersAll checks that resp answers every partition of req, in its
// order, as a whole answer must (a fetcher applies each result to the
// partition at its place).
func answersAll(req *FetchRequest, resp *FetchResponse) error {
	if len(resp.Partitions) != len(req.Partitions) {
		return fmt.Errorf("replica: the leader answered %d partitions of %d", len(resp.Partitions), len(req.Partitions))
	}
	for i := range resp.Partitions {
		r := &resp.Partitions[i]
		if r.Topic != req.Partitions[i].Topic || r.Partition != req.Partitions[i].Partition {
			return fmt.Errorf("replica: the leader answered %s-%d for %s", r.Topic, r.Partition, keyOf(&req.Partitions[i]))
		}
	}
	return nil
}
