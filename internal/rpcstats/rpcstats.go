// Package rpcstats counts the calls a gRPC server answers, by method and
// status code, with a latency histogram per method: interceptors that
// only touch atomics, read by a Snapshot at scrape time.
package rpcstats

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quirelog/quire/internal/atomichist"
)

// numCodes is how many gRPC codes there are (OK through Unauthenticated).
const numCodes = 17

// method holds one method's counters.
type method struct {
	stream  bool
	codes   [numCodes]atomic.Uint64
	latency atomichist.Histogram
}

// Stats counts the calls of one server. The zero value is not ready: use
// New.
type Stats struct {
	mu      sync.RWMutex
	methods map[string]*method // full method name, "/quire.v1.Producer/Produce"
}

// New returns empty Stats.
func New() *Stats { return &Stats{methods: map[string]*method{}} }

func (s *Stats) method(name string, stream bool) *method {
	s.mu.RLock()
	m, ok := s.methods[name]
	s.mu.RUnlock()
	if ok {
		return m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok = s.methods[name]; !ok {
		m = &method{stream: stream}
		s.methods[name] = m
	}
	return m
}

func (m *method) done(start time.Time, err error) {
	c := status.Code(err)
	if int(c) >= numCodes {
		c = codes.Unknown
	}
	m.codes[c].Add(1)
	m.latency.Observe(time.Since(start))
}

// Unary is the interceptor for unary calls.
func (s *Stats) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	m := s.method(info.FullMethod, false)
	start := time.Now()
	resp, err := handler(ctx, req)
	m.done(start, err)
	return resp, err
}

// Stream is the interceptor for streams: a stream counts once, when it
// ends, and its latency is how long it was open.
func (s *Stats) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	m := s.method(info.FullMethod, true)
	start := time.Now()
	err := handler(srv, ss)
	m.done(start, err)
	return err
}

// Observe counts one call of the unary method fullMethod answered some
// other way, as a message of a stream that carries its calls one at a
// time (the produce, fetch and replica fetch streams), so the method's
// figures count every call however it came.
func (s *Stats) Observe(fullMethod string, start time.Time, err error) {
	s.method(fullMethod, false).done(start, err)
}

// Method is one method's counts.
type Method struct {
	Name    string // full method name
	Stream  bool
	ByCode  map[codes.Code]uint64 // codes seen at least once
	Latency atomichist.Snapshot
}

// Snapshot returns every method called so far, sorted by name.
func (s *Stats) Snapshot() []Method {
	s.mu.RLock()
	out := make([]Method, 0, len(s.methods))
	for name, m := range s.methods {
		mm := Method{Name: name, Stream: m.stream, ByCode: map[codes.Code]uint64{}, Latency: m.latency.Snapshot()}
		for c := range m.codes {
			if n := m.codes[c].Load(); n > 0 {
				mm.ByCode[codes.Code(c)] = n
			}
		}
		out = append(out, mm)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Queue times how long requests wait, from their receipt by the handler
// to the start of the work they asked for: for a produce, until its
// append to a partition begins (after those ahead of it on the same
// partition), once per partition; for a fetch, until the read of each
// partition begins (after the partitions before it in the request). The
// zero value is ready; nil counts nothing.
type Queue struct {
	Produce, Fetch atomichist.Histogram
}

// ObserveProduce counts a produce's wait for a partition's append that
// began at started; a nil q or a zero time counts nothing.
func (q *Queue) ObserveProduce(received, started time.Time) {
	if q != nil && !received.IsZero() && !started.IsZero() {
		q.Produce.Observe(started.Sub(received))
	}
}

// ObserveFetch counts a fetch's wait for a partition's read beginning
// now; a nil q or a zero time counts nothing.
func (q *Queue) ObserveFetch(received time.Time) {
	if q != nil && !received.IsZero() {
		q.Fetch.Observe(time.Since(received))
	}
}

// Received is the time a request was received, for Observe*; zero
// (nothing to time) for a nil q, so that with request metrics off no
// clock is read.
func (q *Queue) Received() time.Time {
	if q == nil {
		return time.Time{}
	}
	return time.Now()
}

// QueueSnapshot is a Queue's state at one moment.
type QueueSnapshot struct {
	Produce, Fetch atomichist.Snapshot
}

// Snapshot reads q; a nil q has no observations.
func (q *Queue) Snapshot() QueueSnapshot {
	if q == nil {
		return QueueSnapshot{}
	}
	return QueueSnapshot{Produce: q.Produce.Snapshot(), Fetch: q.Fetch.Snapshot()}
}
