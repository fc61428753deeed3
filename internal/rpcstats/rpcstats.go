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
